//! The undo buffer (log pages not yet written to the undo files) and the ring (where a
//! log page lives in the undo files).
//!
//! Log positions: the log is a sequence of logical pages `lp = 1, 2, ...`, each with
//! [`UNDO_DATA_BYTES`] of record bytes; log position `pos` is byte `pos % UNDO_DATA_BYTES`
//! of logical page `pos / UNDO_DATA_BYTES`. A record's LSN is the position of its first
//! byte.
//!
//! Ring: the undo files taking part in the log, in file_no order, form a ring of
//! `total_pages` physical pages (ring index 0 = page 1 of the first file). Logical page
//! `anchor_lp` is at ring index `anchor_idx`; the next logical page is at the next ring
//! index, wrapping at the end. Files added online join at the end of the ring, only
//! while the live part of the log does not cross the ring's end (so every live page
//! keeps its ring index; see [`Ring::join`]).
//!
//! Invariants (buffer): pages are consecutive logical pages in increasing order; every
//! page but the last is complete or closed; the buffer never holds more than
//! `capacity_pages` pages.

use std::collections::VecDeque;

use super::file::{NO_RECORD_START, UNDO_DATA_BYTES};

pub(crate) const DATA: u64 = UNDO_DATA_BYTES as u64;

/// One log page in the undo buffer.
#[derive(Debug)]
pub(crate) struct BufPage {
    pub lp: u64,
    /// Record bytes written so far (`len() <= UNDO_DATA_BYTES`).
    pub data: Vec<u8>,
    /// LSN of the first record starting in the page, or [`NO_RECORD_START`].
    pub first_record_lsn: u64,
}

/// The undo buffer.
#[derive(Debug)]
pub(crate) struct UndoBuffer {
    pub pages: VecDeque<BufPage>,
    pub capacity_pages: usize,
    /// Page allocations kept for reuse.
    spare: Vec<Vec<u8>>,
    pub high_pages: usize,
}

impl UndoBuffer {
    pub fn new(capacity_pages: usize) -> UndoBuffer {
        assert!(capacity_pages >= 2, "undo buffer of fewer than 2 pages");
        UndoBuffer {
            pages: VecDeque::new(),
            capacity_pages,
            spare: Vec::new(),
            high_pages: 0,
        }
    }

    pub fn front_lp(&self) -> Option<u64> {
        self.pages.front().map(|p| p.lp)
    }

    pub fn get(&self, lp: u64) -> Option<&BufPage> {
        let front = self.front_lp()?;
        let i = usize::try_from(lp.checked_sub(front)?).ok()?;
        self.pages.get(i)
    }

    /// Copy `bytes` into the buffer at log position `pos`, creating pages as needed.
    /// `pos` must be the position right after the last byte written (or the start of a
    /// page following the last page); the caller has checked the capacity.
    pub fn write(&mut self, pos: u64, bytes: &[u8]) {
        let mut pos = pos;
        let mut rest = bytes;
        let record_lsn = pos;
        while !rest.is_empty() {
            let lp = pos / DATA;
            let off = (pos % DATA) as usize;
            if self.pages.back().map(|p| p.lp) != Some(lp) {
                assert_eq!(off, 0, "a new buffer page starts at offset 0");
                if let Some(back) = self.pages.back() {
                    assert_eq!(back.lp + 1, lp, "buffer pages are consecutive");
                }
                let mut data = self.spare.pop().unwrap_or_default();
                data.clear();
                data.reserve(UNDO_DATA_BYTES);
                self.pages.push_back(BufPage {
                    lp,
                    data,
                    first_record_lsn: NO_RECORD_START,
                });
                assert!(
                    self.pages.len() <= self.capacity_pages,
                    "undo buffer overrun"
                );
                self.high_pages = self.high_pages.max(self.pages.len());
            }
            let Some(page) = self.pages.back_mut() else {
                unreachable!("a page was just pushed");
            };
            assert_eq!(page.data.len(), off, "writes are contiguous");
            if page.first_record_lsn == NO_RECORD_START && pos == record_lsn {
                page.first_record_lsn = record_lsn;
            }
            let n = rest.len().min(UNDO_DATA_BYTES - off);
            page.data.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            pos += n as u64;
        }
    }

    /// Drop the written pages up to and including `lp`.
    pub fn pop_through(&mut self, lp: u64) {
        while self.pages.front().is_some_and(|p| p.lp <= lp) {
            if let Some(p) = self.pages.pop_front() {
                self.spare.push(p.data);
            }
        }
        self.spare.truncate(self.capacity_pages);
    }
}

/// Where logical pages live: see the module doc.
#[derive(Clone, Debug)]
pub(crate) struct Ring {
    /// Indexes into the group's file list, in ring order, with their undo page counts.
    pub files: Vec<(usize, u64)>,
    pub total_pages: u64,
    pub anchor_lp: u64,
    pub anchor_idx: u64,
}

impl Ring {
    pub fn new(files: Vec<(usize, u64)>, anchor_lp: u64, anchor_idx: u64) -> Ring {
        let total_pages = files.iter().map(|f| f.1).sum();
        assert!(total_pages > 0 && anchor_idx < total_pages);
        Ring {
            files,
            total_pages,
            anchor_lp,
            anchor_idx,
        }
    }

    /// Ring index of logical page `lp`.
    pub fn idx(&self, lp: u64) -> u64 {
        let n = self.total_pages;
        if lp >= self.anchor_lp {
            (self.anchor_idx + (lp - self.anchor_lp) % n) % n
        } else {
            (self.anchor_idx + n - (self.anchor_lp - lp) % n) % n
        }
    }

    /// (file index, page number) of ring index `idx`.
    pub fn location(&self, idx: u64) -> (usize, u32) {
        assert!(idx < self.total_pages);
        let mut base = 0;
        for &(file, pages) in &self.files {
            if idx < base + pages {
                return (file, (idx - base + 1) as u32);
            }
            base += pages;
        }
        unreachable!("ring index within total_pages");
    }

    /// Ring index of page `page_no` of file `file`, if the file is in the ring.
    pub fn idx_of(&self, file: usize, page_no: u32) -> Option<u64> {
        let mut base = 0;
        for &(f, pages) in &self.files {
            if f == file {
                return Some(base + u64::from(page_no) - 1);
            }
            base += pages;
        }
        None
    }

    /// Append files at the end of the ring. The caller guarantees that the live log
    /// ending at logical page `last_lp` does not cross the ring's end, so every live
    /// page keeps its ring index and `last_lp + 1` follows `last_lp` in ring order.
    pub fn join(&mut self, files: &[(usize, u64)], last_lp: u64) {
        let h = self.idx(last_lp);
        self.files.extend_from_slice(files);
        self.total_pages += files.iter().map(|f| f.1).sum::<u64>();
        self.anchor_lp = last_lp;
        self.anchor_idx = h;
        assert_eq!(self.idx(last_lp), h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_maps_and_joins() {
        let mut r = Ring::new(vec![(0, 3), (1, 2)], 1, 0);
        let locs: Vec<_> = (1..=7).map(|lp| r.location(r.idx(lp))).collect();
        assert_eq!(
            locs,
            vec![(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (0, 1), (0, 2)]
        );
        assert_eq!(r.idx_of(1, 2), Some(4));
        assert_eq!(r.idx_of(2, 1), None);
        // Live log lp 5..=9 at ring indexes 4, 0, 1, 2, 3: crosses the end, so a join
        // must wait; with the live log 7..=10 (indexes 1..=4) a new file goes after 10.
        r.join(&[(2, 4)], 10);
        assert_eq!(r.location(r.idx(10)), (1, 2));
        assert_eq!(r.location(r.idx(11)), (2, 1));
        assert_eq!(r.location(r.idx(14)), (2, 4));
        assert_eq!(r.location(r.idx(15)), (0, 1));
        assert_eq!(r.location(r.idx(7)), (0, 2), "live pages keep their place");
    }

    #[test]
    fn buffer_spans_pages() {
        let mut b = UndoBuffer::new(3);
        let start = DATA; // logical page 1
        b.write(start, &[1u8; 10]);
        b.write(start + 10, &vec![2u8; UNDO_DATA_BYTES]);
        assert_eq!(b.pages.len(), 2);
        assert_eq!(b.get(1).unwrap().first_record_lsn, start);
        assert_eq!(b.get(2).unwrap().first_record_lsn, NO_RECORD_START);
        assert_eq!(b.get(2).unwrap().data.len(), 10);
        b.pop_through(1);
        assert_eq!(b.front_lp(), Some(2));
        assert_eq!(b.high_pages, 2);
    }
}
