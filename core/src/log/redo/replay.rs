//! System restart: read every part from its `from` LSN, verify every block and record,
//! and hand the records with `gci <= max_gci` to the caller, merged across parts by
//! GCI (records of one part in log order; equal GCIs: lower part first).
//!
//! Per part, a [`PartReader`] reads blocks in chunks, checks each (checksum, magic,
//! part, file, page, LSN = this lap, the previous block's checksum), reassembles
//! records that span blocks and decodes them (record checksum). A block that does not
//! verify ends the part: before `durable_end` it is corruption (error 896 naming part,
//! file and offset); at or after it, the torn or never-written tail of the log. No
//! record at or after `durable_end` is visited: it can only belong to a GCI that was
//! never restorable.
//!
//! Restart cuts (`restarts.rs`): records in a cut's void range are skipped, blocks
//! wholly inside it are not read, and the record stream restarts at its end.
//!
//! The part's end (where `RedoLog::open` continues) is the LSN of the first record
//! with `gci > max_gci` (the cut), else the end of the last block that verified.
//! Records after the cut are read and verified but not visited; damage after the
//! first record with `gci > max_gci` is never corruption (nothing there is needed).

use std::path::Path;
use std::sync::Arc;

use super::Lsn;
use super::config::{Geometry, RedoConfig, file_name};
use super::format::{
    BLOCK_BYTES, BLOCK_HEADER_BYTES, BlockAddr, NO_RECORD_START, PAYLOAD, PAYLOAD_BYTES,
    RecordHeader, check_block, corrupt, decode_record, record_len,
};
use super::restarts::RestartCut;
use crate::disk::io::{DiskFile, FileSystem};
use crate::error::{Result, codes};

/// Blocks read at once (128 KB).
const READ_CHUNK_BLOCKS: u64 = 32;

/// What replay did in one part.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartReplayStats {
    pub part: u32,
    pub from: Lsn,
    /// Where appending continues (pass to `RedoLog::open` as the head).
    pub end: Lsn,
    /// LSN of the block where reading stopped, and why.
    pub stop_lsn: Lsn,
    pub stop_reason: String,
    pub blocks_read: u64,
    pub records_applied: u64,
    pub payload_bytes_applied: u64,
    /// Records starting before `from` (in the first block read).
    pub records_before_from: u64,
    /// Records at or after the cut (gci > max_gci, and any record after it).
    pub records_after_cut: u64,
    /// Records after the cut with gci <= max_gci (the part was not in GCI order).
    pub records_out_of_order: u64,
    /// Incomplete records at a restart cut or at the end of the log.
    pub records_abandoned: u64,
    /// Records after a restart cut, written before that restart (see `RedoLog::open`).
    pub records_voided: u64,
    /// Highest GCI of any record read.
    pub max_gci_seen: u64,
}

/// What replay did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    pub parts: Vec<PartReplayStats>,
    pub records_applied: u64,
}

impl ReplayStats {
    /// Per part: where appending continues.
    pub fn end(&self) -> Vec<Lsn> {
        self.parts.iter().map(|p| p.end).collect()
    }
}

/// Read every part from `from[part]` and hand the records with `gci <= max_gci` to
/// `visit`, merged by GCI. Damage before `durable_end[part]` is error 896; at or after
/// it, the part ends there. An error from `visit` stops replay and is returned.
pub fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    cfg: &RedoConfig,
    from: &[Lsn],
    durable_end: &[Lsn],
    max_gci: u64,
    visit: &mut dyn FnMut(&RecordHeader, &[u8]) -> Result<()>,
) -> Result<ReplayStats> {
    let geo = cfg.geometry()?;
    if from.len() != geo.parts as usize || durable_end.len() != geo.parts as usize {
        return Err(codes::bad_argument(format_args!(
            "redo replay with {} from and {} durable_end for {} parts",
            from.len(),
            durable_end.len(),
            geo.parts
        )));
    }
    let mut readers = Vec::new();
    for p in 0..geo.parts {
        let files = super::open::open_part_files(fs, dir, &geo, p)?;
        readers.push(PartReader::new(
            p,
            geo,
            files,
            from[p as usize],
            durable_end[p as usize],
            max_gci,
            super::restarts::read(fs, dir, p)?,
        ));
    }
    let mut total = 0u64;
    loop {
        let mut best: Option<(u64, usize)> = None;
        for (i, r) in readers.iter_mut().enumerate() {
            if r.cut.is_some() {
                continue;
            }
            r.fill()?;
            let Some(rec) = r.front() else {
                continue;
            };
            // Nothing at or after the durable end belongs to a restorable GCI: it can
            // only be the undurable tail of an earlier run (whose blocks still chain
            // onto the durable ones when this run wrote nothing past them).
            if rec.h.gci > max_gci || rec.lsn >= r.durable_end {
                r.cut = Some(rec.lsn);
                continue;
            }
            if best.is_none_or(|(g, _)| rec.h.gci < g) {
                best = Some((rec.h.gci, i));
            }
        }
        let Some((_, i)) = best else {
            break;
        };
        let r = &mut readers[i];
        let (h, payload) = r.front_record();
        visit(&h, payload)?;
        let n = payload.len() as u64;
        r.stats.records_applied += 1;
        r.stats.payload_bytes_applied += n;
        r.advance();
        total += 1;
    }
    let mut stats = ReplayStats {
        parts: Vec::new(),
        records_applied: total,
    };
    for mut r in readers {
        r.drain(max_gci)?;
        let after_last_block = r.last_valid_block.map_or(0, |b| (b + 1) * PAYLOAD);
        r.stats.end = r.cut.unwrap_or(after_last_block.max(r.end_floor));
        stats.parts.push(r.stats);
    }
    Ok(stats)
}

#[derive(Clone, Copy)]
struct RecRef {
    lsn: Lsn,
    h: RecordHeader,
    start: usize,
    len: usize,
}

/// Decoded records and their payloads.
#[derive(Default)]
struct Batch {
    recs: Vec<RecRef>,
    arena: Vec<u8>,
    pos: usize,
}

impl Batch {
    fn exhausted(&self) -> bool {
        self.pos >= self.recs.len()
    }
    fn clear(&mut self) {
        self.recs.clear();
        self.arena.clear();
        self.pos = 0;
    }
}

struct PartReader {
    part: u32,
    geo: Geometry,
    files: Vec<Arc<dyn DiskFile>>,
    from: Lsn,
    durable_end: Lsn,
    next_block: u64,
    stop_block: u64,
    chunk: Vec<u8>,
    chunk_first: u64,
    chunk_blocks: u64,
    prev_crc: Option<u32>,
    /// Bytes of a record that started in an earlier block.
    pending: Vec<u8>,
    pending_lsn: Lsn,
    /// Parsing starts at the next block's first record (at `from`, after a restart).
    seek_first: bool,
    ready: Batch,
    done: bool,
    cut: Option<Lsn>,
    max_gci: u64,
    /// A record with gci > max_gci was decoded: nothing after it is needed, so damage
    /// after it is not corruption.
    beyond_max_gci: bool,
    /// Restart cuts of the part (`restarts.rs`).
    cuts: Vec<RestartCut>,
    /// The end is at least here (`from`, and the end of void ranges skipped).
    end_floor: Lsn,
    last_valid_block: Option<u64>,
    stats: PartReplayStats,
}

impl PartReader {
    fn new(
        part: u32,
        geo: Geometry,
        files: Vec<Arc<dyn DiskFile>>,
        from: Lsn,
        durable_end: Lsn,
        max_gci: u64,
        cuts: Vec<RestartCut>,
    ) -> PartReader {
        let first = from / PAYLOAD;
        PartReader {
            part,
            geo,
            files,
            from,
            durable_end,
            next_block: first,
            stop_block: first + geo.ring_blocks,
            chunk: Vec::new(),
            chunk_first: 0,
            chunk_blocks: 0,
            prev_crc: None,
            pending: Vec::new(),
            pending_lsn: 0,
            seek_first: true,
            ready: Batch::default(),
            done: false,
            cut: None,
            max_gci,
            beyond_max_gci: false,
            cuts,
            end_floor: from,
            last_valid_block: None,
            stats: PartReplayStats {
                part,
                from,
                ..PartReplayStats::default()
            },
        }
    }

    /// Read blocks until a record is ready or the part ends.
    fn fill(&mut self) -> Result<()> {
        while self.ready.exhausted() && !self.done {
            self.read_next_block()?;
        }
        Ok(())
    }

    fn front(&self) -> Option<&RecRef> {
        self.ready.recs.get(self.ready.pos)
    }

    fn front_record(&self) -> (RecordHeader, &[u8]) {
        let r = &self.ready.recs[self.ready.pos];
        (r.h, &self.ready.arena[r.start..r.start + r.len])
    }

    fn advance(&mut self) {
        self.ready.pos += 1;
    }

    /// Read (and verify) the rest of the part without visiting it.
    fn drain(&mut self, max_gci: u64) -> Result<()> {
        loop {
            self.fill()?;
            let Some(rec) = self.front() else {
                return Ok(());
            };
            let (lsn, gci) = (rec.lsn, rec.h.gci);
            self.cut.get_or_insert(lsn);
            self.stats.records_after_cut += 1;
            if gci <= max_gci {
                self.stats.records_out_of_order += 1;
            }
            self.advance();
        }
    }

    fn finish(&mut self, block_no: u64, reason: &str) {
        if !self.pending.is_empty() {
            self.stats.records_abandoned += 1;
            self.pending.clear();
        }
        self.done = true;
        self.stats.stop_lsn = block_no * PAYLOAD;
        self.stats.stop_reason = reason.to_string();
    }

    /// A block or record that does not verify at `offset` of block `block_no`.
    fn damaged(&mut self, block_no: u64, offset: usize, what: &str) -> Result<()> {
        if block_no * PAYLOAD < self.durable_end && !self.beyond_max_gci {
            let (file_no, page_no) = self.geo.location(block_no);
            let at = u64::from(page_no) * BLOCK_BYTES as u64 + offset as u64;
            return Err(corrupt(self.part, &file_name(self.part, file_no), at, what));
        }
        self.finish(block_no, what);
        Ok(())
    }

    fn load(&mut self, block_no: u64) -> Result<()> {
        if block_no >= self.chunk_first && block_no < self.chunk_first + self.chunk_blocks {
            return Ok(());
        }
        let (file_no, page_no) = self.geo.location(block_no);
        let in_file = self.geo.blocks_per_file - (u64::from(page_no) - 1);
        let n = READ_CHUNK_BLOCKS
            .min(in_file)
            .min(self.stop_block - block_no);
        self.chunk.resize(n as usize * BLOCK_BYTES, 0);
        self.files[file_no as usize]
            .read_at(&mut self.chunk, u64::from(page_no) * BLOCK_BYTES as u64)
            .map_err(|e| {
                codes::file_read_error(format_args!(
                    "redo log {}: {e}",
                    file_name(self.part, file_no)
                ))
            })?;
        self.chunk_first = block_no;
        self.chunk_blocks = n;
        Ok(())
    }

    fn read_next_block(&mut self) -> Result<()> {
        if self.ready.exhausted() {
            self.ready.clear();
        }
        let mut b = self.next_block;
        // Blocks wholly inside a restart's void range are skipped unread.
        if let Some(c) = self.cuts.iter().find(|c| c.covers_block(b)) {
            b = c.resume / PAYLOAD;
            self.next_block = b;
            self.end_floor = self.end_floor.max(c.resume);
        }
        if self.cuts.iter().any(|c| c.resume == b * PAYLOAD) {
            // The stream restarts here: the record left incomplete before is abandoned
            // and the checksum chain is not carried across.
            if !self.pending.is_empty() {
                self.stats.records_abandoned += 1;
                self.pending.clear();
            }
            self.seek_first = true;
            self.prev_crc = None;
        }
        if b >= self.stop_block {
            self.finish(b, "read the whole ring");
            return Ok(());
        }
        self.load(b)?;
        let chunk = std::mem::take(&mut self.chunk);
        let r = self.process_block(b, &chunk);
        self.chunk = chunk;
        r
    }

    fn process_block(&mut self, b: u64, chunk: &[u8]) -> Result<()> {
        let i = (b - self.chunk_first) as usize;
        let block = &chunk[i * BLOCK_BYTES..(i + 1) * BLOCK_BYTES];
        let (file_no, page_no) = self.geo.location(b);
        let at = BlockAddr {
            part: self.part,
            lsn: b * PAYLOAD,
            file_no,
            page_no,
        };
        let checked = check_block(block, &at).and_then(|(h, crc)| {
            match self.prev_crc.is_some_and(|p| p != h.prev_crc) {
                true => Err("broken chain (previous block checksum)"),
                false => Ok((h, crc)),
            }
        });
        let (h, crc) = match checked {
            Ok(v) => v,
            Err(what) => {
                // The block holding a restart's cut: what follows the cut is void, so
                // a damaged or never-written block here only ends the records before it.
                if let Some(c) = self.cuts.iter().find(|c| c.cut / PAYLOAD == b).copied() {
                    if !self.pending.is_empty() {
                        self.stats.records_abandoned += 1;
                        self.pending.clear();
                    }
                    self.next_block = (c.resume / PAYLOAD).max(b + 1);
                    self.end_floor = self.end_floor.max(c.resume);
                    return Ok(());
                }
                return self.damaged(b, 0, what);
            }
        };
        self.stats.blocks_read += 1;
        self.last_valid_block = Some(b);
        self.prev_crc = Some(crc);
        self.next_block = b + 1;
        let used = h.used as usize;
        let data = &block[BLOCK_HEADER_BYTES..BLOCK_HEADER_BYTES + used];
        let mut p = 0usize;
        if self.seek_first {
            self.pending.clear();
            if h.first_record_offset == NO_RECORD_START {
                return Ok(());
            }
            self.seek_first = false;
            p = h.first_record_offset as usize;
        } else if !self.pending.is_empty() {
            let complete = match self.take_pending(data, &mut p) {
                Ok(c) => c,
                Err(what) => return self.damaged(b, BLOCK_HEADER_BYTES, what),
            };
            let expect_first = if complete && p < used {
                p as u32
            } else {
                NO_RECORD_START
            };
            if h.first_record_offset != expect_first {
                return self.damaged(b, 0, "first record offset does not follow the record");
            }
            if complete {
                let bytes = std::mem::take(&mut self.pending);
                let r = self.complete(&bytes, self.pending_lsn);
                self.pending = bytes;
                self.pending.clear();
                if let Err(what) = r {
                    return self.damaged(b, BLOCK_HEADER_BYTES, what);
                }
            }
        } else if h.first_record_offset != 0 {
            return self.damaged(b, 0, "block does not start with a record");
        }
        while p < used {
            let lsn = b * PAYLOAD + p as u64;
            let whole = (used - p >= 4)
                .then(|| record_len(&data[p..]))
                .flatten()
                .filter(|&len| p + len <= used);
            if let Some(len) = whole {
                if let Err(what) = self.complete(&data[p..p + len], lsn) {
                    return self.damaged(b, BLOCK_HEADER_BYTES + p, what);
                }
                p += len;
                continue;
            }
            // The record continues in the next block (or is damaged).
            self.pending_lsn = lsn;
            let start = p;
            if let Err(what) = self.take_pending(data, &mut p) {
                return self.damaged(b, BLOCK_HEADER_BYTES + start, what);
            }
        }
        if !self.pending.is_empty() && used < PAYLOAD_BYTES {
            return self.damaged(b, 0, "record cut short in a block that is not full");
        }
        Ok(())
    }

    /// Add bytes of `data` from `*p` to the pending record; true when it is complete.
    fn take_pending(
        &mut self,
        data: &[u8],
        p: &mut usize,
    ) -> std::result::Result<bool, &'static str> {
        loop {
            let want = if self.pending.len() < 4 {
                4
            } else {
                record_len(&self.pending).ok_or("bad record length")?
            };
            if self.pending.len() == want && want > 4 {
                return Ok(true);
            }
            let n = (want - self.pending.len()).min(data.len() - *p);
            if n == 0 {
                return Ok(false);
            }
            self.pending.extend_from_slice(&data[*p..*p + n]);
            *p += n;
        }
    }

    /// A whole record at `lsn`: decode it and hold it (or count it before `from`).
    fn complete(&mut self, bytes: &[u8], lsn: Lsn) -> std::result::Result<(), &'static str> {
        let (h, payload) = decode_record(bytes)?;
        self.stats.max_gci_seen = self.stats.max_gci_seen.max(h.gci);
        if h.gci > self.max_gci {
            self.beyond_max_gci = true;
        }
        if self.cuts.iter().any(|c| c.voids(lsn)) {
            self.stats.records_voided += 1;
            return Ok(());
        }
        if lsn < self.from {
            self.stats.records_before_from += 1;
            return Ok(());
        }
        let start = self.ready.arena.len();
        self.ready.arena.extend_from_slice(payload);
        self.ready.recs.push(RecRef {
            lsn,
            h,
            start,
            len: payload.len(),
        });
        Ok(())
    }
}
