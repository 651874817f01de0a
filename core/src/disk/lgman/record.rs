//! Undo log records: what a disk-data change needs to be undone to the older page
//! state (NDB's Dbtup disk undo record types), and their byte encoding with a CRC-32C.
//!
//! ```text
//! offset   size  field (little-endian)
//!      0      4  len: total bytes of the record, header and trailer included
//!      4      2  type (NDB's UNDO_* numbers, see RecordType)
//!      6      2  reserved, 0
//!      8      n  payload (per type, see docs/undo-log.md)
//!  len-8      4  len again (lets the log be read backwards)
//!  len-4      4  crc32c of bytes 0..len-4
//! ```
//!
//! Invariants: `decode(encode(r)) == r`; decode accepts exactly one whole record and
//! rejects a wrong checksum, an unknown type, a payload of the wrong size and a length
//! mismatch with NDB error 896 (`codes::corrupt_page`).

use crate::error::{Result, codes};

/// Bytes of the record header (len, type, reserved).
pub const RECORD_HEADER_BYTES: usize = 8;
/// Bytes of the record trailer (len, crc).
pub const RECORD_TRAILER_BYTES: usize = 8;
/// Smallest record (no payload).
pub const MIN_RECORD_BYTES: usize = RECORD_HEADER_BYTES + RECORD_TRAILER_BYTES;

/// Record type numbers (NDB's `File_formats::Undofile` UNDO_* values where NDB has one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum RecordType {
    LcpStart = 2,
    TupleAlloc = 3,
    TupleUpdate = 4,
    TupleFree = 5,
    ExtentAlloc = 8,
    ExtentFree = 9,
    End = 0x7FFF,
}

impl RecordType {
    fn from_u16(v: u16) -> Option<RecordType> {
        Some(match v {
            2 => RecordType::LcpStart,
            3 => RecordType::TupleAlloc,
            4 => RecordType::TupleUpdate,
            5 => RecordType::TupleFree,
            8 => RecordType::ExtentAlloc,
            9 => RecordType::ExtentFree,
            0x7FFF => RecordType::End,
            _ => return None,
        })
    }
}

/// One undo log record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UndoRecord {
    /// A row slot was allocated on a disk page: undo frees it.
    TupleAlloc {
        file_no: u32,
        page_no: u32,
        slot: u32,
    },
    /// A row's disk part was updated: `before` is its old image.
    TupleUpdate {
        file_no: u32,
        page_no: u32,
        slot: u32,
        before: Vec<u8>,
    },
    /// A row slot was freed: `before` is the freed row's image.
    TupleFree {
        file_no: u32,
        page_no: u32,
        slot: u32,
        before: Vec<u8>,
    },
    /// An extent was given to a fragment.
    ExtentAlloc {
        file_no: u32,
        extent_no: u32,
        table_id: u32,
        fragment_id: u32,
    },
    /// An extent was returned to the tablespace.
    ExtentFree {
        file_no: u32,
        extent_no: u32,
        table_id: u32,
        fragment_id: u32,
    },
    /// A local checkpoint started: recovery undoes back to here.
    LcpStart { lcp_id: u64 },
    /// End marker.
    End,
}

impl UndoRecord {
    pub fn record_type(&self) -> RecordType {
        match self {
            UndoRecord::TupleAlloc { .. } => RecordType::TupleAlloc,
            UndoRecord::TupleUpdate { .. } => RecordType::TupleUpdate,
            UndoRecord::TupleFree { .. } => RecordType::TupleFree,
            UndoRecord::ExtentAlloc { .. } => RecordType::ExtentAlloc,
            UndoRecord::ExtentFree { .. } => RecordType::ExtentFree,
            UndoRecord::LcpStart { .. } => RecordType::LcpStart,
            UndoRecord::End => RecordType::End,
        }
    }

    fn payload_bytes(&self) -> usize {
        match self {
            UndoRecord::TupleAlloc { .. } => 12,
            UndoRecord::TupleUpdate { before, .. } | UndoRecord::TupleFree { before, .. } => {
                16 + before.len()
            }
            UndoRecord::ExtentAlloc { .. } | UndoRecord::ExtentFree { .. } => 16,
            UndoRecord::LcpStart { .. } => 8,
            UndoRecord::End => 0,
        }
    }

    /// Total encoded bytes.
    pub fn encoded_len(&self) -> usize {
        MIN_RECORD_BYTES + self.payload_bytes()
    }

    /// Encode with header, trailer and checksum.
    pub fn encode(&self) -> Vec<u8> {
        let len = self.encoded_len();
        let mut b = Vec::with_capacity(len);
        b.extend_from_slice(&(len as u32).to_le_bytes());
        b.extend_from_slice(&(self.record_type() as u16).to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        let put = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        match self {
            UndoRecord::TupleAlloc {
                file_no,
                page_no,
                slot,
            } => {
                put(&mut b, *file_no);
                put(&mut b, *page_no);
                put(&mut b, *slot);
            }
            UndoRecord::TupleUpdate {
                file_no,
                page_no,
                slot,
                before,
            }
            | UndoRecord::TupleFree {
                file_no,
                page_no,
                slot,
                before,
            } => {
                put(&mut b, *file_no);
                put(&mut b, *page_no);
                put(&mut b, *slot);
                put(&mut b, before.len() as u32);
                b.extend_from_slice(before);
            }
            UndoRecord::ExtentAlloc {
                file_no,
                extent_no,
                table_id,
                fragment_id,
            }
            | UndoRecord::ExtentFree {
                file_no,
                extent_no,
                table_id,
                fragment_id,
            } => {
                put(&mut b, *file_no);
                put(&mut b, *extent_no);
                put(&mut b, *table_id);
                put(&mut b, *fragment_id);
            }
            UndoRecord::LcpStart { lcp_id } => b.extend_from_slice(&lcp_id.to_le_bytes()),
            UndoRecord::End => {}
        }
        b.extend_from_slice(&(len as u32).to_le_bytes());
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(b.len(), len, "encoded length");
        b
    }

    /// Decode exactly one whole record, verifying length, checksum and type.
    pub fn decode(b: &[u8]) -> Result<UndoRecord> {
        if b.len() < MIN_RECORD_BYTES {
            return Err(bad(format_args!("short undo record ({} bytes)", b.len())));
        }
        let len = u32_at(b, 0) as usize;
        if len != b.len() || u32_at(b, len - 8) as usize != len {
            return Err(bad(format_args!(
                "undo record length mismatch ({len} vs {} bytes)",
                b.len()
            )));
        }
        if crc32c::crc32c(&b[..len - 4]) != u32_at(b, len - 4) {
            return Err(bad("undo record checksum mismatch"));
        }
        let ty = u16::from_le_bytes([b[4], b[5]]);
        let Some(ty) = RecordType::from_u16(ty) else {
            return Err(bad(format_args!("unknown undo record type {ty}")));
        };
        let p = &b[RECORD_HEADER_BYTES..len - RECORD_TRAILER_BYTES];
        let want = |n: usize| -> Result<()> {
            if p.len() == n {
                Ok(())
            } else {
                Err(bad(format_args!(
                    "undo record {ty:?}: payload of {} bytes, expected {n}",
                    p.len()
                )))
            }
        };
        let rec = match ty {
            RecordType::TupleAlloc => {
                want(12)?;
                UndoRecord::TupleAlloc {
                    file_no: u32_at(p, 0),
                    page_no: u32_at(p, 4),
                    slot: u32_at(p, 8),
                }
            }
            RecordType::TupleUpdate | RecordType::TupleFree => {
                if p.len() < 16 {
                    want(16)?;
                }
                let n = u32_at(p, 12) as usize;
                want(16 + n)?;
                let (file_no, page_no, slot) = (u32_at(p, 0), u32_at(p, 4), u32_at(p, 8));
                let before = p[16..].to_vec();
                if ty == RecordType::TupleUpdate {
                    UndoRecord::TupleUpdate {
                        file_no,
                        page_no,
                        slot,
                        before,
                    }
                } else {
                    UndoRecord::TupleFree {
                        file_no,
                        page_no,
                        slot,
                        before,
                    }
                }
            }
            RecordType::ExtentAlloc | RecordType::ExtentFree => {
                want(16)?;
                let (file_no, extent_no, table_id, fragment_id) =
                    (u32_at(p, 0), u32_at(p, 4), u32_at(p, 8), u32_at(p, 12));
                if ty == RecordType::ExtentAlloc {
                    UndoRecord::ExtentAlloc {
                        file_no,
                        extent_no,
                        table_id,
                        fragment_id,
                    }
                } else {
                    UndoRecord::ExtentFree {
                        file_no,
                        extent_no,
                        table_id,
                        fragment_id,
                    }
                }
            }
            RecordType::LcpStart => {
                want(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(p);
                UndoRecord::LcpStart {
                    lcp_id: u64::from_le_bytes(a),
                }
            }
            RecordType::End => {
                want(0)?;
                UndoRecord::End
            }
        };
        Ok(rec)
    }
}

pub(crate) fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn bad(what: impl std::fmt::Display) -> crate::error::NdbError {
    codes::corrupt_page(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn samples() -> Vec<UndoRecord> {
        vec![
            UndoRecord::TupleAlloc {
                file_no: 1,
                page_no: 2,
                slot: 3,
            },
            UndoRecord::TupleUpdate {
                file_no: 4,
                page_no: 5,
                slot: 6,
                before: b"old row image".to_vec(),
            },
            UndoRecord::TupleFree {
                file_no: 7,
                page_no: 8,
                slot: 9,
                before: vec![],
            },
            UndoRecord::ExtentAlloc {
                file_no: 1,
                extent_no: 10,
                table_id: 11,
                fragment_id: 12,
            },
            UndoRecord::ExtentFree {
                file_no: 2,
                extent_no: 13,
                table_id: 14,
                fragment_id: 15,
            },
            UndoRecord::LcpStart { lcp_id: 1 << 40 },
            UndoRecord::End,
        ]
    }

    #[test]
    fn round_trip_every_type() {
        for r in samples() {
            let b = r.encode();
            assert_eq!(b.len(), r.encoded_len());
            assert_eq!(UndoRecord::decode(&b).unwrap(), r);
        }
    }

    #[test]
    fn damage_is_rejected() {
        for r in samples() {
            let b = r.encode();
            for i in 0..b.len() {
                let mut c = b.clone();
                c[i] ^= 0x10;
                assert_eq!(
                    UndoRecord::decode(&c).unwrap_err().code,
                    896,
                    "{r:?} byte {i}"
                );
            }
            assert!(UndoRecord::decode(&b[..b.len() - 1]).is_err());
        }
        assert!(UndoRecord::decode(&[0u8; 4]).is_err());
        // Unknown type with a valid checksum.
        let mut b = UndoRecord::End.encode();
        b[4..6].copy_from_slice(&77u16.to_le_bytes());
        let crc = crc32c::crc32c(&b[..b.len() - 4]);
        let n = b.len();
        b[n - 4..].copy_from_slice(&crc.to_le_bytes());
        let e = UndoRecord::decode(&b).unwrap_err();
        assert!(e.message.contains("unknown undo record type 77"), "{e}");
    }
}
