//! The 32 KB disk page and its header, common to data files and undo files.
//!
//! Every page written to a disk-data file starts with a 32-byte header carrying a
//! CRC-32C of the rest of the page, the page's own address (file number, page number)
//! and its LSN. [`seal`] fills the header just before a write and [`verify`] checks it
//! on every read: a page read from the wrong place, torn, or bit-rotted is an error,
//! never data. Byte layout: `docs/disk-data-files.md`.
//!
//! ```text
//! offset size  field
//!      0    4  crc32c of bytes 4..32768 (little-endian u32)
//!      4    2  page kind (PageKind as u16)
//!      6    2  format version (1)
//!      8    4  file_no
//!     12    4  page_no
//!     16    8  lsn: undo LSN of the last change (data pages), record LSN (undo pages)
//!     24    8  kind-specific (e.g. owner of a data page, bytes used in an undo page)
//!     32       body
//! ```
//!
//! A page that was never written is all zeros (files are preallocated zero-filled); it
//! verifies as [`PageKind::Unformatted`] so a fresh file needs no formatting pass.

use crate::error::{NdbError, Result, codes};

/// Size of every disk page (NDB's GLOBAL_PAGE_SIZE).
pub const DISK_PAGE_SIZE: usize = 32 * 1024;
/// Bytes of the common header.
pub const PAGE_HEADER_BYTES: usize = 32;
/// Bytes available after the header.
pub const PAGE_BODY_BYTES: usize = DISK_PAGE_SIZE - PAGE_HEADER_BYTES;
/// Header format version written by this code.
pub const PAGE_FORMAT_VERSION: u16 = 1;

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum PageKind {
    /// Never written (all zeros).
    Unformatted = 0,
    /// Page 0 of a data file or undo file: the file header.
    ZeroPage = 1,
    /// A page of extent headers in a data file.
    ExtentHeaders = 2,
    /// A data page holding disk parts of rows.
    Data = 3,
    /// A page of the undo log.
    Undo = 4,
}

impl PageKind {
    fn from_u16(v: u16) -> Option<PageKind> {
        Some(match v {
            0 => PageKind::Unformatted,
            1 => PageKind::ZeroPage,
            2 => PageKind::ExtentHeaders,
            3 => PageKind::Data,
            4 => PageKind::Undo,
            _ => return None,
        })
    }
}

/// The decoded header of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    pub kind: PageKind,
    pub file_no: u32,
    pub page_no: u32,
    pub lsn: u64,
    /// Kind-specific word.
    pub extra: u64,
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// Write `hdr` into the first 32 bytes of `page` and the checksum over the rest.
/// Call it last, just before the page goes to disk.
pub fn seal(page: &mut [u8], hdr: &PageHeader) {
    assert_eq!(page.len(), DISK_PAGE_SIZE, "disk page size");
    assert_ne!(
        hdr.kind,
        PageKind::Unformatted,
        "sealing an unformatted page"
    );
    page[4..6].copy_from_slice(&(hdr.kind as u16).to_le_bytes());
    page[6..8].copy_from_slice(&PAGE_FORMAT_VERSION.to_le_bytes());
    page[8..12].copy_from_slice(&hdr.file_no.to_le_bytes());
    page[12..16].copy_from_slice(&hdr.page_no.to_le_bytes());
    page[16..24].copy_from_slice(&hdr.lsn.to_le_bytes());
    page[24..32].copy_from_slice(&hdr.extra.to_le_bytes());
    let crc = crc32c::crc32c(&page[4..]);
    page[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Decode the header without verifying anything (for pages still in memory).
pub fn header(page: &[u8]) -> Option<PageHeader> {
    Some(PageHeader {
        kind: PageKind::from_u16(u16_at(page, 4))?,
        file_no: u32_at(page, 8),
        page_no: u32_at(page, 12),
        lsn: u64_at(page, 16),
        extra: u64_at(page, 24),
    })
}

/// Verify a page just read from `file_no`/`page_no`: checksum, address and kind. An
/// all-zero page is [`PageKind::Unformatted`].
pub fn verify(page: &[u8], file_no: u32, page_no: u32) -> Result<PageHeader> {
    if page.len() != DISK_PAGE_SIZE {
        return Err(corrupt(file_no, page_no, "wrong page size"));
    }
    let stored = u32_at(page, 0);
    if stored == 0 && page.iter().all(|&b| b == 0) {
        return Ok(PageHeader {
            kind: PageKind::Unformatted,
            file_no,
            page_no,
            lsn: 0,
            extra: 0,
        });
    }
    if crc32c::crc32c(&page[4..]) != stored {
        return Err(corrupt(file_no, page_no, "checksum mismatch"));
    }
    let Some(hdr) = header(page) else {
        return Err(corrupt(file_no, page_no, "unknown page kind"));
    };
    if u16_at(page, 6) != PAGE_FORMAT_VERSION {
        return Err(corrupt(file_no, page_no, "unknown page format version"));
    }
    if hdr.file_no != file_no || hdr.page_no != page_no {
        return Err(corrupt(
            file_no,
            page_no,
            format_args!(
                "page claims to be file {} page {}",
                hdr.file_no, hdr.page_no
            ),
        ));
    }
    Ok(hdr)
}

fn corrupt(file_no: u32, page_no: u32, what: impl std::fmt::Display) -> NdbError {
    codes::corrupt_page(format_args!("disk file {file_no} page {page_no}: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_verify_and_detect_damage() {
        let mut p = vec![0u8; DISK_PAGE_SIZE];
        assert_eq!(verify(&p, 3, 9).unwrap().kind, PageKind::Unformatted);
        p[100] = 7;
        let h = PageHeader {
            kind: PageKind::Data,
            file_no: 3,
            page_no: 9,
            lsn: 77,
            extra: 5,
        };
        seal(&mut p, &h);
        assert_eq!(verify(&p, 3, 9).unwrap(), h);
        // Wrong address.
        assert_eq!(verify(&p, 3, 10).unwrap_err().code, 896);
        // Bit rot anywhere, header included.
        for off in [2usize, 5, 20, 100, DISK_PAGE_SIZE - 1] {
            let mut q = p.clone();
            q[off] ^= 1;
            assert!(verify(&q, 3, 9).is_err(), "damage at {off} undetected");
        }
    }
}
