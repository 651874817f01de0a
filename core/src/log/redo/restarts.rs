//! Restart cuts: where a system restart cut each part's log. `RedoLog::open` at head
//! `cut` continues appending at `resume`, the first block after the valid log that
//! follows `cut` (blocks on disk are never rewritten). Records at LSNs in
//! `[cut, resume)` were written before the crash but belong to GCIs the restart
//! discarded: they are void, even if a later GCI with the same number commits. At
//! `resume` the record stream restarts (a record left incomplete before is abandoned).
//!
//! Kept per part in `D<8+part>/DBLQH/RedoRestarts`, replaced atomically (and synced)
//! by `open` before any new block is written; entries ending before the tail are
//! dropped then. Layout (little-endian):
//!
//! ```text
//! off      size  field
//!   0         4  magic "RDLR"
//!   4         2  format version (1)
//!   6         2  reserved, 0
//!   8         4  part
//!  12         4  n: number of cuts
//!  16    16 x n  cut u64, resume u64 (increasing; resume on a block boundary)
//!  16+16n     4  crc32c of bytes 0..16+16n
//! ```

use std::path::{Path, PathBuf};

use super::Lsn;
use super::config::part_dir;
use super::format::{PAYLOAD, corrupt, u16_at, u32_at, u64_at};
use crate::disk::io::FileSystem;
use crate::error::{Result, codes};

const MAGIC: &[u8; 4] = b"RDLR";
const VERSION: u16 = 1;
const FILE_NAME: &str = "RedoRestarts";

/// One restart cut of a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RestartCut {
    /// The head passed to `open`: records from here on are void.
    pub cut: Lsn,
    /// Where appending continued (a block boundary, >= cut).
    pub resume: Lsn,
}

impl RestartCut {
    /// Whether block `block_no` lies wholly inside the void range.
    pub fn covers_block(&self, block_no: u64) -> bool {
        block_no * PAYLOAD >= self.cut && block_no * PAYLOAD < self.resume
    }

    /// Whether the record at `lsn` is void.
    pub fn voids(&self, lsn: Lsn) -> bool {
        lsn >= self.cut && lsn < self.resume
    }
}

pub(crate) fn path(dir: &Path, part: u32) -> PathBuf {
    part_dir(dir, part).join(FILE_NAME)
}

fn encode(part: u32, cuts: &[RestartCut]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + 16 * cuts.len());
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&part.to_le_bytes());
    b.extend_from_slice(&(cuts.len() as u32).to_le_bytes());
    for c in cuts {
        b.extend_from_slice(&c.cut.to_le_bytes());
        b.extend_from_slice(&c.resume.to_le_bytes());
    }
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

fn decode(part: u32, b: &[u8]) -> std::result::Result<Vec<RestartCut>, &'static str> {
    if b.len() < 20 || &b[0..4] != MAGIC || u16_at(b, 4) != VERSION {
        return Err("not a redo restarts file");
    }
    let n = u32_at(b, 12) as usize;
    if b.len() != 20 + 16 * n {
        return Err("restarts file of the wrong length");
    }
    if crc32c::crc32c(&b[..b.len() - 4]) != u32_at(b, b.len() - 4) {
        return Err("restarts file checksum mismatch");
    }
    if u32_at(b, 8) != part {
        return Err("restarts file of another part");
    }
    let mut cuts: Vec<RestartCut> = Vec::with_capacity(n);
    for i in 0..n {
        let c = RestartCut {
            cut: u64_at(b, 16 + 16 * i),
            resume: u64_at(b, 24 + 16 * i),
        };
        let after_previous = cuts.last().is_none_or(|p| p.resume <= c.cut);
        if c.cut > c.resume || !c.resume.is_multiple_of(PAYLOAD) || !after_previous {
            return Err("restart cuts out of order");
        }
        cuts.push(c);
    }
    Ok(cuts)
}

/// The cuts of `part` (none if the file does not exist).
pub(crate) fn read(fs: &dyn FileSystem, dir: &Path, part: u32) -> Result<Vec<RestartCut>> {
    let p = path(dir, part);
    let bytes = fs
        .read_all(&p)
        .map_err(|e| codes::file_read_error(format_args!("{}: {e}", p.display())))?;
    match bytes {
        None => Ok(Vec::new()),
        Some(b) => decode(part, &b)
            .map_err(|what| corrupt(part, &format!("D{}/DBLQH/{FILE_NAME}", 8 + part), 0, what)),
    }
}

/// Replace the cuts of `part` (atomically, durably).
pub(crate) fn write(fs: &dyn FileSystem, dir: &Path, part: u32, cuts: &[RestartCut]) -> Result<()> {
    let p = path(dir, part);
    fs.write_atomic(&p, &encode(part, cuts))
        .map_err(|e| codes::file_system_error(format_args!("write {}: {e}", p.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let cuts = vec![
            RestartCut {
                cut: 10,
                resume: PAYLOAD * 2,
            },
            RestartCut {
                cut: PAYLOAD * 5,
                resume: PAYLOAD * 5,
            },
        ];
        let b = encode(3, &cuts);
        assert_eq!(decode(3, &b).unwrap(), cuts);
        assert!(decode(2, &b).is_err(), "another part's file");
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 4;
            assert!(decode(3, &c).is_err(), "damage at {i} undetected");
        }
        assert!(cuts[0].voids(10) && !cuts[0].voids(9) && !cuts[0].voids(PAYLOAD * 2));
        assert!(!cuts[0].covers_block(0) && cuts[0].covers_block(1));
    }
}
