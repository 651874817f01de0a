//! Reading the undo log back: reopening existing undo files ([`LogfileGroup::open`])
//! and reading records newest first ([`LogfileGroup::read_backwards`]).
//!
//! Finding the head at open. Every page of every file is read and verified; a page
//! that fails its checksum is taken as never written (each page is written once, and
//! synced before any record on it counts as durable, so a page torn by a power loss
//! held nothing durable) — unless a page says the log was durable past the head found
//! (each page records how far the log was durable when it was written): then a
//! durable page is damaged, error 896. Files are in the ring up to the last one
//! holding an undo page (files join the ring in file_no order); later files are
//! pending. Candidate heads are tried from the highest logical page down. From a
//! candidate `h` the walk goes backwards through the ring while the page at the ring's
//! previous position is the previous logical page; it stops at `g`. `h` is accepted
//! when the walk covers the log from the tail recorded in page `h` (the tail when `h`
//! was written), or when the page before `g` was overwritten by a newer lap (so it had
//! been released), or when `g` is the log's first page. Otherwise a page written
//! before `h` is missing: `h` was never durable (a sync covers every page written
//! before it), and the candidates continue below `g`. The tail after open is the
//! first record starting at or after that recorded tail; every record from there to
//! the head is decoded and its checksum verified. Every file is then fdatasynced once,
//! since what was found may have been written but never synced (a process crash).
//!
//! Reads take the `state` lock only to look up a page (buffer or file location), and do
//! the file read without it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::buffer::{DATA, Ring};
use super::file::{NO_RECORD_START, UndoFile, UndoPage};
use super::record::{MIN_RECORD_BYTES, RECORD_TRAILER_BYTES, UndoRecord, u32_at};
use super::{LogfileGroup, LogfileGroupConfig, MAX_RECORD_BYTES, buffer_pages};
use crate::disk::Lsn;
use crate::disk::io::FileSystem;
use crate::disk::page::DISK_PAGE_SIZE;
use crate::disk::shared_memory::SharedGlobalMemory;
use crate::error::{NdbError, Result, codes};

/// What open found in one undo page.
#[derive(Clone, Copy, Debug)]
struct Found {
    lp: u64,
    tail_pos: u64,
    generation: u64,
    durable_pos: u64,
    first_record_lsn: u64,
}

fn corrupt(what: impl std::fmt::Display) -> NdbError {
    codes::corrupt_page(format_args!("undo log: {what}"))
}

impl LogfileGroup {
    /// Open the existing undo files of a logfile group (restart): verify every page,
    /// find the head and the tail, verify every record between them.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        memory: &SharedGlobalMemory,
        config: LogfileGroupConfig,
        paths: &[PathBuf],
    ) -> Result<LogfileGroup> {
        let pages = buffer_pages(&config)?;
        if paths.is_empty() {
            return Err(codes::bad_argument("a logfile group needs an undo file"));
        }
        let reservation = memory.try_reserve((pages * DISK_PAGE_SIZE) as u64)?;
        let mut files = Vec::new();
        for p in paths {
            let f = UndoFile::open(&*fs, p)?;
            if f.logfile_group_id != config.id {
                return Err(corrupt(format_args!(
                    "{} belongs to logfile group {}, not {}",
                    p.display(),
                    f.logfile_group_id,
                    config.id
                )));
            }
            files.push(Arc::new(f));
        }
        files.sort_by_key(|f| f.file_no);
        if files.windows(2).any(|w| w[0].file_no == w[1].file_no) {
            return Err(corrupt("two undo files with the same file_no"));
        }
        // Every page of every file, verified.
        let mut at: BTreeMap<(usize, u32), Found> = BTreeMap::new();
        let mut by_lp: BTreeMap<u64, Vec<(usize, u32)>> = BTreeMap::new();
        let mut torn: std::collections::BTreeSet<(usize, u32)> = Default::default();
        for (i, f) in files.iter().enumerate() {
            for page_no in 1..=f.undo_pages as u32 {
                // A page that fails its checksum was torn by a power loss while being
                // written; pages are written once and synced before a record on them
                // counts as durable, so it holds nothing durable: absent.
                let page = match f.read_undo_page(page_no) {
                    Err(e) if e.code == codes::corrupt_page("").code => {
                        torn.insert((i, page_no));
                        None
                    }
                    other => other?,
                };
                if let Some(p) = page {
                    let found = Found {
                        lp: p.page_pos / DATA,
                        tail_pos: p.tail_pos,
                        generation: p.generation,
                        durable_pos: p.durable_pos,
                        first_record_lsn: p.first_record_lsn,
                    };
                    at.insert((i, page_no), found);
                    by_lp.entry(found.lp).or_default().push((i, page_no));
                }
            }
        }
        let all = |n: usize| -> Vec<(usize, u64)> {
            files[..n]
                .iter()
                .enumerate()
                .map(|(i, f)| (i, f.undo_pages))
                .collect()
        };
        let Some(active) = at.keys().chain(&torn).map(|k| k.0 + 1).max() else {
            let ring = Ring::new(all(files.len()), 1, 0);
            return Ok(LogfileGroup::assemble(
                fs,
                config,
                reservation,
                pages,
                files,
                ring,
                Vec::new(),
                DATA,
                DATA,
            ));
        };
        let base = Ring::new(all(active), 1, 0);
        let n = base.total_pages;
        let mut chosen = None;
        let mut below = u64::MAX;
        'candidates: while let Some((&h, locs)) = by_lp.range(..below).next_back() {
            let mut lowest_stop = h;
            for &(fi, page_no) in locs {
                let Some(h_idx) = base.idx_of(fi, page_no) else {
                    continue;
                };
                let (g, overwritten) = walk_back(&base, &at, h, h_idx, n);
                let tail = at[&(fi, page_no)].tail_pos;
                if g * DATA <= tail || overwritten || g == 1 {
                    chosen = Some((h, h_idx, g, tail));
                    break 'candidates;
                }
                lowest_stop = lowest_stop.min(g);
            }
            below = lowest_stop;
        }
        let pending: Vec<usize> = (active..files.len()).collect();
        let generation = at.values().map(|f| f.generation).max().map_or(0, |g| g + 1);
        let Some((h, h_idx, g, tail)) = chosen else {
            // Nothing durable: start after every page seen.
            let next = by_lp.keys().next_back().map_or(1, |m| m + 1);
            let ring = Ring::new(all(active), next, 0);
            let pos = next * DATA;
            let group = LogfileGroup::assemble(
                fs,
                config,
                reservation,
                pages,
                files,
                ring,
                pending,
                pos,
                pos,
            );
            group.state.lock().generation = generation;
            return Ok(group);
        };
        // A page that fails its checksum is a power loss's (torn while written, never
        // durable) only if no page says the log was durable past the head; otherwise a
        // durable page is damaged and the head-finding stopped at it.
        let durable_past_head =
            at.values().map(|f| f.durable_pos).max().unwrap_or(0) > (h + 1) * DATA;
        if let (true, Some(&(fi, page_no))) = (durable_past_head, torn.first()) {
            return Err(corrupt(format_args!(
                "{} page {page_no} fails its checksum inside the durable log",
                files[fi].path.display()
            )));
        }
        let ring = Ring::new(all(active), h, h_idx);
        let append_pos = (h + 1) * DATA;
        // The tail: the first record starting at or after the recorded tail.
        let from_lp = g.max(tail / DATA);
        let mut tail_pos = append_pos;
        for lp in from_lp..=h {
            let loc = ring.location(ring.idx(lp));
            let f = at[&loc].first_record_lsn;
            if f != NO_RECORD_START {
                tail_pos = f;
                break;
            }
        }
        let group = LogfileGroup::assemble(
            fs,
            config,
            reservation,
            pages,
            files,
            ring,
            pending,
            tail_pos,
            append_pos,
        );
        let last = group.verify_records()?;
        // What was found may have been written but not synced before a process crash:
        // make it durable before anything is written after it.
        let files = group.state.lock().files.clone();
        for f in files {
            f.sync().map_err(|e| {
                codes::file_system_error(format_args!("fdatasync {}: {e}", f.path.display()))
            })?;
        }
        {
            let mut st = group.state.lock();
            st.last_record_lsn = last;
            st.generation = generation;
            st.maybe_join();
        }
        Ok(group)
    }

    /// Decode every record from the tail to the head; the LSN of the last one. A
    /// record cut off by the end of the log, or by a page that starts with a new
    /// record, never became durable: it is skipped and its page noted as abandoned.
    fn verify_records(&self) -> Result<Option<Lsn>> {
        let (mut pos, end) = {
            let st = self.state.lock();
            (st.tail_pos, st.append_pos)
        };
        let mut pages = PageCache::default();
        let mut last = None;
        let mut abandoned = BTreeMap::new();
        while pos < end {
            let lp = pos / DATA;
            let page_end = lp * DATA + pages.get(self, lp)?.data.len() as u64;
            if pos >= page_end {
                pos = (lp + 1) * DATA;
                continue;
            }
            let next = (lp + 1) * DATA;
            let cut = next >= end || pages.get(self, lp + 1)?.first_record_lsn == next;
            // A record (or its length) running past the page into a page that does not
            // continue it was cut off: never durable.
            let len = if pos + 4 > page_end && cut {
                None
            } else {
                Some(self.record_len_at(&mut pages, pos, u64::MAX)?)
            };
            match len {
                Some(len) if pos + len as u64 <= page_end || !cut => {
                    if pos + len as u64 > end {
                        return Err(corrupt(format_args!(
                            "record at LSN {pos} runs past the log"
                        )));
                    }
                    let bytes = pages.read(self, pos, len)?;
                    UndoRecord::decode(&bytes).map_err(|e| e.detail(format_args!("LSN {pos}")))?;
                    last = Some(pos);
                    pos += len as u64;
                }
                _ => {
                    abandoned.insert(lp, pos);
                    pos = next;
                }
            }
        }
        self.state.lock().abandoned = abandoned;
        Ok(last)
    }

    fn record_len_at(&self, pages: &mut PageCache, lsn: Lsn, end: u64) -> Result<usize> {
        let head = pages.read(self, lsn, 4)?;
        let len = u32_at(&head, 0) as usize;
        if !(MIN_RECORD_BYTES..=MAX_RECORD_BYTES).contains(&len) || lsn + len as u64 > end {
            return Err(corrupt(format_args!(
                "record at LSN {lsn}: bad length {len}"
            )));
        }
        Ok(len)
    }

    /// A log page: from the buffer if it is still there, else from its undo file
    /// (verified, and checked to be this logical page, not an older lap's).
    fn load_page(&self, lp: u64) -> Result<UndoPage> {
        let file_and_page = {
            let st = self.state.lock();
            if let Some(p) = st.buffer.get(lp) {
                return Ok(UndoPage {
                    page_pos: lp * DATA,
                    tail_pos: st.tail_pos,
                    generation: st.generation,
                    durable_pos: 0,
                    first_record_lsn: p.first_record_lsn,
                    data: p.data.clone(),
                });
            }
            let (fi, page_no) = st.ring.location(st.ring.idx(lp));
            (st.files[fi].clone(), page_no)
        };
        let (file, page_no) = file_and_page;
        match file.read_undo_page(page_no)? {
            Some(p) if p.page_pos == lp * DATA => Ok(p),
            _ => Err(corrupt(format_args!(
                "log page {lp} not found in {} page {page_no}",
                file.path.display()
            ))),
        }
    }

    /// Records from `from_lsn` (a record's LSN) back to the first record at or after
    /// `down_to_lsn` (and not before the tail), newest first.
    pub fn read_backwards(&self, from_lsn: Lsn, down_to_lsn: Lsn) -> Result<UndoIter<'_>> {
        let (tail, end) = {
            let st = self.state.lock();
            (st.tail_pos, st.append_pos)
        };
        if from_lsn < tail || from_lsn >= end {
            return Err(codes::bad_argument(format_args!(
                "LSN {from_lsn} outside the log ({tail}..{end})"
            )));
        }
        Ok(UndoIter {
            group: self,
            next: Some(from_lsn),
            floor: down_to_lsn.max(tail),
            end,
            pages: PageCache::default(),
        })
    }
}

/// Walk backwards from logical page `h` at ring index `h_idx`: the lowest logical page
/// of the run, and whether the run ended at a page overwritten by a newer lap.
fn walk_back(
    ring: &Ring,
    at: &BTreeMap<(usize, u32), Found>,
    h: u64,
    h_idx: u64,
    n: u64,
) -> (u64, bool) {
    let (mut lp, mut idx, mut count) = (h, h_idx, 1);
    let Some(mut generation) = at.get(&ring.location(h_idx)).map(|f| f.generation) else {
        return (lp, false);
    };
    while count < n && lp > 1 {
        idx = (idx + n - 1) % n;
        match at.get(&ring.location(idx)) {
            Some(f) if f.lp == lp - 1 && f.generation <= generation => {
                lp -= 1;
                generation = f.generation;
                count += 1;
            }
            Some(f) if f.lp > lp - 1 && f.generation <= generation => return (lp, true),
            _ => return (lp, false),
        }
    }
    (lp, count >= n)
}

/// The last two pages read (records span at most two pages).
#[derive(Default)]
struct PageCache {
    pages: Vec<(u64, UndoPage)>,
}

impl PageCache {
    fn get(&mut self, group: &LogfileGroup, lp: u64) -> Result<&UndoPage> {
        if let Some(i) = self.pages.iter().position(|p| p.0 == lp) {
            return Ok(&self.pages[i].1);
        }
        let p = group.load_page(lp)?;
        if self.pages.len() >= 2 {
            self.pages.remove(0);
        }
        self.pages.push((lp, p));
        let Some(last) = self.pages.last() else {
            unreachable!("a page was just pushed");
        };
        Ok(&last.1)
    }

    /// `n` bytes from log position `pos` (possibly across a page boundary).
    fn read(&mut self, group: &LogfileGroup, pos: u64, n: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(n);
        let mut pos = pos;
        while out.len() < n {
            let lp = pos / DATA;
            let off = (pos % DATA) as usize;
            let page = self.get(group, lp)?;
            if off >= page.data.len() {
                return Err(corrupt(format_args!(
                    "record runs past the bytes used in log page {lp}"
                )));
            }
            let take = (n - out.len()).min(page.data.len() - off);
            out.extend_from_slice(&page.data[off..off + take]);
            pos += take as u64;
        }
        Ok(out)
    }
}

/// Iterator of `(lsn, record)` newest first; see [`LogfileGroup::read_backwards`].
pub struct UndoIter<'a> {
    group: &'a LogfileGroup,
    next: Option<Lsn>,
    floor: Lsn,
    end: Lsn,
    pages: PageCache,
}

impl UndoIter<'_> {
    fn step(&mut self, lsn: Lsn) -> Result<(UndoRecord, Option<Lsn>)> {
        let len = self.group.record_len_at(&mut self.pages, lsn, self.end)?;
        let bytes = self.pages.read(self.group, lsn, len)?;
        let rec = UndoRecord::decode(&bytes).map_err(|e| e.detail(format_args!("LSN {lsn}")))?;
        // The previous record ends at `lsn`, or at the end of the bytes used in the
        // previous page when `lsn` starts a page.
        if lsn < self.floor + MIN_RECORD_BYTES as u64 {
            return Ok((rec, None));
        }
        let lp = lsn / DATA;
        let prev_end = if lsn.is_multiple_of(DATA) {
            let abandoned = self.group.state.lock().abandoned.get(&(lp - 1)).copied();
            match abandoned {
                Some(e) => e,
                None => (lp - 1) * DATA + self.pages.get(self.group, lp - 1)?.data.len() as u64,
            }
        } else {
            lsn
        };
        if prev_end < self.floor + MIN_RECORD_BYTES as u64 {
            return Ok((rec, None));
        }
        let trailer = self.pages.read(
            self.group,
            prev_end - RECORD_TRAILER_BYTES as u64,
            RECORD_TRAILER_BYTES,
        )?;
        let prev_len = u64::from(u32_at(&trailer, 0));
        if prev_len < MIN_RECORD_BYTES as u64 || prev_len > prev_end {
            return Err(corrupt(format_args!(
                "record before LSN {lsn}: bad length {prev_len}"
            )));
        }
        let prev = prev_end - prev_len;
        Ok((rec, (prev >= self.floor).then_some(prev)))
    }
}

impl Iterator for UndoIter<'_> {
    type Item = Result<(Lsn, UndoRecord)>;

    fn next(&mut self) -> Option<Self::Item> {
        let lsn = self.next.take()?;
        if lsn < self.floor {
            return None;
        }
        match self.step(lsn) {
            Ok((rec, prev)) => {
                self.next = prev;
                Some(Ok((lsn, rec)))
            }
            Err(e) => Some(Err(e)),
        }
    }
}
