//! Byte formats of the REDO log: 4 KB blocks with a sealed header, the file header
//! block, and records (each with its own CRC-32C). Byte layout: `docs/redo-log.md`.
//!
//! ```text
//! block (4096 bytes)                    record (28 + n bytes, may span blocks)
//! off size field                        off  size field
//!   0    4 crc32c of bytes 4..4096        0    4 len = 28 + n
//!   4    4 magic "RDLB"                   4    1 kind
//!   8    2 format version (1)             5    3 reserved, 0
//!  10    2 flags (0)                      8    8 gci
//!  12    4 part                          16    4 table_id
//!  16    8 LSN of payload byte 0         20    4 fragment_id
//!  24    4 used payload bytes            24    n payload
//!  28    4 first record offset         24+n    4 crc32c of bytes 0..24+n
//!  32    4 crc of the previous block
//!  36    4 file_no
//!  40    4 page_no (block in the file)
//!  44    4 reserved, 0
//!  48 4048 payload
//! ```
//!
//! Invariants: [`seal_block`] is the last thing done to a block before it is written;
//! [`check_block`] verifies checksum, magic, version, part, position (LSN, file, page)
//! and the field ranges of every block read. A record is accepted only with a matching
//! length and checksum ([`decode_record`]).

use crate::error::{NdbError, codes};

/// Bytes of one log block: the write unit (one page of the OS page cache, the atomic
/// write unit of common SSDs), so a sync pads at most 4 KB per part.
pub const BLOCK_BYTES: usize = 4096;
/// Bytes of the block header.
pub const BLOCK_HEADER_BYTES: usize = 48;
/// Record bytes one block carries.
pub const PAYLOAD_BYTES: usize = BLOCK_BYTES - BLOCK_HEADER_BYTES;
/// `PAYLOAD_BYTES` as an LSN distance.
pub const PAYLOAD: u64 = PAYLOAD_BYTES as u64;
/// First-record offset of a block in which no record starts.
pub const NO_RECORD_START: u32 = u32::MAX;
/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 24;
/// Bytes a record adds to its payload (header and checksum).
pub const RECORD_OVERHEAD_BYTES: usize = RECORD_HEADER_BYTES + 4;
/// Largest payload of one record (a row image is at most a few tens of KB in NDB).
pub const MAX_RECORD_PAYLOAD_BYTES: usize = 1 << 20;

const BLOCK_MAGIC: &[u8; 4] = b"RDLB";
const FILE_MAGIC: &[u8; 4] = b"RDLF";
const FORMAT_VERSION: u16 = 1;

/// What a record says about itself (the payload is the caller's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordHeader {
    /// Global checkpoint id of the transaction that wrote the record.
    pub gci: u64,
    pub table_id: u32,
    pub fragment_id: u32,
    /// Operation kind (the caller's numbering: insert, update, delete...).
    pub kind: u8,
}

/// Total encoded bytes of a record with `payload_bytes` of payload.
pub fn encoded_len(payload_bytes: usize) -> usize {
    RECORD_OVERHEAD_BYTES + payload_bytes
}

/// A batch of encoded records, built without any lock and appended in one go.
/// Reusing one batch (`clear`) allocates nothing in steady state.
#[derive(Clone, Debug, Default)]
pub struct EncodedRecords {
    buf: Vec<u8>,
    /// Offset of every record in `buf`, increasing.
    starts: Vec<usize>,
}

impl EncodedRecords {
    pub fn new() -> Self {
        EncodedRecords::default()
    }

    /// Encode one record (header, payload, CRC-32C). Panics if the payload is larger
    /// than [`MAX_RECORD_PAYLOAD_BYTES`] (a row image never is).
    pub fn push(&mut self, h: &RecordHeader, payload: &[u8]) {
        assert!(
            payload.len() <= MAX_RECORD_PAYLOAD_BYTES,
            "redo record payload of {} bytes",
            payload.len()
        );
        let start = self.buf.len();
        self.starts.push(start);
        let len = encoded_len(payload.len()) as u32;
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(&[h.kind, 0, 0, 0]);
        self.buf.extend_from_slice(&h.gci.to_le_bytes());
        self.buf.extend_from_slice(&h.table_id.to_le_bytes());
        self.buf.extend_from_slice(&h.fragment_id.to_le_bytes());
        self.buf.extend_from_slice(payload);
        let crc = crc32c::crc32c(&self.buf[start..]);
        self.buf.extend_from_slice(&crc.to_le_bytes());
    }

    /// Number of records.
    /// Every record as (kind, GCI, payload), in order (a follower replica applies them
    /// as a restart's replay would).
    pub fn records(&self) -> impl Iterator<Item = (u8, u64, &[u8])> + '_ {
        self.starts.iter().map(move |&start| {
            let b = &self.buf[start..];
            let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
            let kind = b[4];
            let mut g = [0u8; 8];
            g.copy_from_slice(&b[8..16]);
            // Header: length, kind and padding, GCI, table id, fragment id; the CRC last.
            (
                kind,
                u64::from_le_bytes(g),
                &b[RECORD_HEADER_BYTES..len - 4],
            )
        })
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Encoded bytes (what the batch takes in the log, block headers aside).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.starts.clear();
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Offset of the first record starting at or after `off`, if any.
    pub(crate) fn first_start_at_or_after(&self, off: usize) -> Option<usize> {
        let i = self.starts.partition_point(|&s| s < off);
        self.starts.get(i).copied()
    }
}

pub(crate) fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
pub(crate) fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
pub(crate) fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// Length field of an encoded record whose first 4 bytes are `b`, if plausible.
pub(crate) fn record_len(b: &[u8]) -> Option<usize> {
    let len = u32_at(b, 0) as usize;
    (RECORD_OVERHEAD_BYTES..=encoded_len(MAX_RECORD_PAYLOAD_BYTES))
        .contains(&len)
        .then_some(len)
}

/// Decode one whole encoded record: the length must match `b` and the checksum verify.
pub(crate) fn decode_record(b: &[u8]) -> Result<(RecordHeader, &[u8]), &'static str> {
    if b.len() < RECORD_OVERHEAD_BYTES || record_len(b) != Some(b.len()) {
        return Err("bad record length");
    }
    let n = b.len();
    if crc32c::crc32c(&b[..n - 4]) != u32_at(b, n - 4) {
        return Err("record checksum mismatch");
    }
    if b[5..8] != [0, 0, 0] {
        return Err("record reserved bytes not zero");
    }
    let h = RecordHeader {
        kind: b[4],
        gci: u64_at(b, 8),
        table_id: u32_at(b, 16),
        fragment_id: u32_at(b, 20),
    };
    Ok((h, &b[RECORD_HEADER_BYTES..n - 4]))
}

/// The header of a log block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockHeader {
    pub part: u32,
    /// LSN of payload byte 0 (= block number x PAYLOAD).
    pub lsn: u64,
    /// Payload bytes in use (filler and records), 1..=PAYLOAD_BYTES.
    pub used: u32,
    /// Offset of the first record starting in the block, or NO_RECORD_START.
    pub first_record_offset: u32,
    /// Checksum field of the previous block (0 when unknown).
    pub prev_crc: u32,
    pub file_no: u32,
    pub page_no: u32,
}

/// Fill the header of `block` and its checksum; returns the checksum.
pub(crate) fn seal_block(block: &mut [u8], h: &BlockHeader) -> u32 {
    assert_eq!(block.len(), BLOCK_BYTES, "redo block size");
    assert!(
        h.used >= 1 && h.used as usize <= PAYLOAD_BYTES,
        "used bytes"
    );
    assert!(
        h.first_record_offset == NO_RECORD_START || h.first_record_offset < h.used,
        "first record inside the used bytes"
    );
    assert_eq!(h.lsn % PAYLOAD, 0, "block LSN on a block boundary");
    block[4..8].copy_from_slice(BLOCK_MAGIC);
    block[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    block[10..12].copy_from_slice(&0u16.to_le_bytes());
    block[12..16].copy_from_slice(&h.part.to_le_bytes());
    block[16..24].copy_from_slice(&h.lsn.to_le_bytes());
    block[24..28].copy_from_slice(&h.used.to_le_bytes());
    block[28..32].copy_from_slice(&h.first_record_offset.to_le_bytes());
    block[32..36].copy_from_slice(&h.prev_crc.to_le_bytes());
    block[36..40].copy_from_slice(&h.file_no.to_le_bytes());
    block[40..44].copy_from_slice(&h.page_no.to_le_bytes());
    block[44..48].copy_from_slice(&0u32.to_le_bytes());
    // Bytes after `used` are whatever the buffer held: zero them so the block is a
    // function of its content.
    block[BLOCK_HEADER_BYTES + h.used as usize..].fill(0);
    let crc = crc32c::crc32c(&block[4..]);
    block[0..4].copy_from_slice(&crc.to_le_bytes());
    crc
}

/// Where a block is expected: part, LSN, file and page.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockAddr {
    pub part: u32,
    pub lsn: u64,
    pub file_no: u32,
    pub page_no: u32,
}

/// Verify a block read from `at`; returns its header and checksum, or why it is not
/// the block expected there (never written, older lap, torn, bit rot).
pub(crate) fn check_block(
    block: &[u8],
    at: &BlockAddr,
) -> Result<(BlockHeader, u32), &'static str> {
    if block.len() != BLOCK_BYTES {
        return Err("wrong block size");
    }
    let crc = u32_at(block, 0);
    if crc == 0 && block.iter().all(|&b| b == 0) {
        return Err("block never written");
    }
    if crc32c::crc32c(&block[4..]) != crc {
        return Err("block checksum mismatch");
    }
    if &block[4..8] != BLOCK_MAGIC {
        return Err("not a redo log block");
    }
    if u16_at(block, 8) != FORMAT_VERSION {
        return Err("unknown block format version");
    }
    let h = BlockHeader {
        part: u32_at(block, 12),
        lsn: u64_at(block, 16),
        used: u32_at(block, 24),
        first_record_offset: u32_at(block, 28),
        prev_crc: u32_at(block, 32),
        file_no: u32_at(block, 36),
        page_no: u32_at(block, 40),
    };
    if h.part != at.part || h.file_no != at.file_no || h.page_no != at.page_no {
        return Err("block belongs to another part, file or page");
    }
    if h.lsn != at.lsn {
        return Err("block of another lap of the ring (LSN mismatch)");
    }
    if h.used == 0 || h.used as usize > PAYLOAD_BYTES {
        return Err("bad used bytes");
    }
    if h.first_record_offset != NO_RECORD_START && h.first_record_offset >= h.used {
        return Err("first record offset beyond the used bytes");
    }
    if u16_at(block, 10) != 0 || u32_at(block, 44) != 0 {
        return Err("unknown block flags");
    }
    Ok((h, crc))
}

/// What block 0 of every log file says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileHeader {
    pub part: u32,
    pub file_no: u32,
    pub files_per_part: u32,
    pub file_size_bytes: u64,
}

/// Block 0 of a log file.
pub(crate) fn encode_file_header(h: &FileHeader) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK_BYTES];
    b[4..8].copy_from_slice(FILE_MAGIC);
    b[8..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&h.part.to_le_bytes());
    b[16..20].copy_from_slice(&h.file_no.to_le_bytes());
    b[20..24].copy_from_slice(&h.files_per_part.to_le_bytes());
    b[24..32].copy_from_slice(&h.file_size_bytes.to_le_bytes());
    b[32..36].copy_from_slice(&(BLOCK_BYTES as u32).to_le_bytes());
    let crc = crc32c::crc32c(&b[4..]);
    b[0..4].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Verify block 0 of a log file against what the configuration expects.
pub(crate) fn check_file_header(b: &[u8], want: &FileHeader) -> Result<(), String> {
    if b.len() != BLOCK_BYTES || crc32c::crc32c(&b[4..]) != u32_at(b, 0) {
        return Err("file header checksum mismatch".into());
    }
    if &b[4..8] != FILE_MAGIC || u16_at(b, 8) != FORMAT_VERSION {
        return Err("not a redo log file".into());
    }
    if u32_at(b, 32) as usize != BLOCK_BYTES {
        return Err("wrong block size".into());
    }
    let got = FileHeader {
        part: u32_at(b, 12),
        file_no: u32_at(b, 16),
        files_per_part: u32_at(b, 20),
        file_size_bytes: u64_at(b, 24),
    };
    if got != *want {
        return Err(format!(
            "file header says part {} file {} of {} files of {} bytes, configuration \
             wants part {} file {} of {} files of {} bytes (changing the redo log \
             geometry needs an initial restart)",
            got.part,
            got.file_no,
            got.files_per_part,
            got.file_size_bytes,
            want.part,
            want.file_no,
            want.files_per_part,
            want.file_size_bytes
        ));
    }
    Ok(())
}

/// Error for a damaged log at a place that must be intact.
pub(crate) fn corrupt(part: u32, file: &str, offset: u64, what: &str) -> NdbError {
    codes::corrupt_page(format_args!(
        "redo log part {part} file {file} offset {offset}: {what}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip_and_damage() {
        let mut r = EncodedRecords::new();
        let h = RecordHeader {
            gci: 7 << 32 | 3,
            table_id: 11,
            fragment_id: 2,
            kind: 4,
        };
        r.push(&h, b"payload");
        r.push(&h, b"");
        assert_eq!(r.len(), 2);
        assert_eq!(r.bytes(), encoded_len(7) + encoded_len(0));
        let first = &r.as_bytes()[..encoded_len(7)];
        let (g, p) = decode_record(first).unwrap();
        assert_eq!((g, p), (h, &b"payload"[..]));
        assert_eq!(r.first_start_at_or_after(1), Some(encoded_len(7)));
        assert_eq!(r.first_start_at_or_after(encoded_len(7) + 1), None);
        for i in 0..first.len() {
            let mut b = first.to_vec();
            b[i] ^= 0x10;
            assert!(decode_record(&b).is_err(), "damage at {i} undetected");
        }
    }

    #[test]
    fn block_seal_check() {
        let mut b = vec![0xeeu8; BLOCK_BYTES];
        let h = BlockHeader {
            part: 1,
            lsn: 5 * PAYLOAD,
            used: 100,
            first_record_offset: 0,
            prev_crc: 9,
            file_no: 2,
            page_no: 3,
        };
        let crc = seal_block(&mut b, &h);
        let at = BlockAddr {
            part: 1,
            lsn: 5 * PAYLOAD,
            file_no: 2,
            page_no: 3,
        };
        assert_eq!(check_block(&b, &at).unwrap(), (h, crc));
        let older = BlockAddr {
            lsn: 5 * PAYLOAD + 1000 * PAYLOAD,
            ..at
        };
        assert!(check_block(&b, &older).is_err(), "older lap accepted");
        assert!(check_block(&vec![0u8; BLOCK_BYTES], &at).is_err());
        for off in [0usize, 5, 20, 60, BLOCK_BYTES - 1] {
            let mut c = b.clone();
            c[off] ^= 1;
            assert!(check_block(&c, &at).is_err(), "damage at {off} undetected");
        }
    }
}
