//! [`Pages`]: the byte content of one simulated file, stored in copy-on-write chunks of
//! [`CHUNK_BYTES`] so that a sparse or barely written file costs little memory and a
//! crash image (a clone) costs one pointer per chunk, not a copy of the file.
//!
//! Invariants: `chunks.len() == len.div_ceil(CHUNK_BYTES)`; a `None` chunk reads as
//! zeros; every byte at or beyond `len` inside the last chunk is zero (so growing the
//! length never exposes old bytes); `allocated` counts the `Some` chunks.

use std::sync::Arc;

/// Granularity of the in-memory file store (and of a sparse file's space accounting).
pub const CHUNK_BYTES: usize = 16 * 1024;
/// Granularity of torn writes: a power loss keeps or loses whole 512-byte sectors.
pub const SECTOR_BYTES: u64 = 512;

type Chunk = Arc<[u8; CHUNK_BYTES]>;

#[derive(Clone, Default)]
pub(super) struct Pages {
    len: u64,
    chunks: Vec<Option<Chunk>>,
    allocated: usize,
}

fn chunk_count(len: u64) -> usize {
    // Callers bound lengths by MAX_MEM_FILE_BYTES, far below usize::MAX chunks.
    len.div_ceil(CHUNK_BYTES as u64) as usize
}

/// The pieces `(chunk index, offset in chunk, bytes)` of the range `offset..offset+n`.
fn pieces(offset: u64, n: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let mut pos = offset;
    let end = offset + n as u64;
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let idx = (pos / CHUNK_BYTES as u64) as usize;
        let in_chunk = (pos % CHUNK_BYTES as u64) as usize;
        let take = (CHUNK_BYTES - in_chunk).min((end - pos) as usize);
        pos += take as u64;
        Some((idx, in_chunk, take))
    })
}

impl Pages {
    /// A zero-filled content of `len` bytes (no chunk allocated).
    pub(super) fn zeroed(len: u64) -> Pages {
        Pages {
            len,
            chunks: vec![None; chunk_count(len)],
            allocated: 0,
        }
    }

    pub(super) fn from_bytes(bytes: &[u8]) -> Pages {
        let mut p = Pages::zeroed(bytes.len() as u64);
        p.write(0, bytes);
        p
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Bytes held by allocated chunks.
    pub(super) fn allocated_bytes(&self) -> u64 {
        (self.allocated * CHUNK_BYTES) as u64
    }

    /// Bytes a write of `offset..end` would newly allocate (whole chunks).
    pub(super) fn unallocated_bytes_in(&self, offset: u64, end: u64) -> u64 {
        if end <= offset {
            return 0;
        }
        let first = (offset / CHUNK_BYTES as u64) as usize;
        let last = ((end - 1) / CHUNK_BYTES as u64) as usize;
        let missing = (first..=last)
            .filter(|&i| self.chunks.get(i).is_none_or(|c| c.is_none()))
            .count();
        (missing * CHUNK_BYTES) as u64
    }

    /// Copy `offset..offset+buf.len()` into `buf`; the range must lie within `len`.
    pub(super) fn read(&self, offset: u64, buf: &mut [u8]) {
        assert!(offset + buf.len() as u64 <= self.len, "read beyond the end");
        let mut at = 0;
        for (idx, in_chunk, take) in pieces(offset, buf.len()) {
            let dst = &mut buf[at..at + take];
            match &self.chunks[idx] {
                Some(c) => dst.copy_from_slice(&c[in_chunk..in_chunk + take]),
                None => dst.fill(0),
            }
            at += take;
        }
    }

    /// Write `data` at `offset`, growing the length when it ends beyond it.
    pub(super) fn write(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        if end > self.len {
            self.set_len(end);
        }
        let mut at = 0;
        for (idx, in_chunk, take) in pieces(offset, data.len()) {
            let slot = &mut self.chunks[idx];
            if slot.is_none() {
                *slot = Some(Arc::new([0u8; CHUNK_BYTES]));
                self.allocated += 1;
            }
            if let Some(c) = slot {
                Arc::make_mut(c)[in_chunk..in_chunk + take].copy_from_slice(&data[at..at + take]);
            }
            at += take;
        }
    }

    /// Grow (zero-filled) or shrink to `len` bytes.
    pub(super) fn set_len(&mut self, len: u64) {
        let n = chunk_count(len);
        if len < self.len {
            for c in self.chunks.drain(n..) {
                if c.is_some() {
                    self.allocated -= 1;
                }
            }
            let tail = (len % CHUNK_BYTES as u64) as usize;
            if tail != 0
                && let Some(Some(c)) = self.chunks.last_mut()
            {
                Arc::make_mut(c)[tail..].fill(0);
            }
        } else {
            self.chunks.resize(n, None);
        }
        self.len = len;
        debug_assert_eq!(self.chunks.len(), chunk_count(self.len));
    }

    pub(super) fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len as usize];
        self.read(0, &mut out);
        out
    }

    /// Flip one byte (corruption tests); false when `offset` is beyond the end.
    pub(super) fn flip_byte(&mut self, offset: u64) -> bool {
        if offset >= self.len {
            return false;
        }
        let mut b = [0u8];
        self.read(offset, &mut b);
        self.write(offset, &[b[0] ^ 0x5a]);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_read_write_across_chunks_and_shrink() {
        let mut p = Pages::zeroed(3 * CHUNK_BYTES as u64);
        assert_eq!(p.allocated_bytes(), 0);
        let data: Vec<u8> = (0..CHUNK_BYTES + 100)
            .map(|i| (i % 251) as u8 + 1)
            .collect();
        p.write(CHUNK_BYTES as u64 - 50, &data);
        assert_eq!(p.allocated_bytes(), 3 * CHUNK_BYTES as u64);
        let mut back = vec![0u8; data.len()];
        p.read(CHUNK_BYTES as u64 - 50, &mut back);
        assert_eq!(back, data);
        let snapshot = p.clone();
        p.set_len(CHUNK_BYTES as u64 + 10);
        p.set_len(3 * CHUNK_BYTES as u64);
        let mut tail = [1u8; 20];
        p.read(CHUNK_BYTES as u64 + 10, &mut tail);
        assert_eq!(tail, [0u8; 20], "shrink then grow exposes zeros");
        // The clone is unaffected (copy on write).
        let mut s = vec![0u8; data.len()];
        snapshot.read(CHUNK_BYTES as u64 - 50, &mut s);
        assert_eq!(s, data);
        assert_eq!(p.unallocated_bytes_in(0, 10), 0);
        assert_eq!(
            p.unallocated_bytes_in(2 * CHUNK_BYTES as u64, 2 * CHUNK_BYTES as u64 + 1),
            CHUNK_BYTES as u64
        );
    }
}
