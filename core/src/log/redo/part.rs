//! One log part: its buffer of unwritten blocks and positions (`PartState`, under the
//! `state` mutex) and its files (`PartIo`, under the `io` mutex).
//!
//! Positions (LSNs of this part): `tail <= head`, `durable <= head` and
//! `written_block x PAYLOAD <= head`; blocks below `written_block` are written (synced
//! up to `durable`), blocks `written_block..` are in the buffer, the last of them the
//! open block where `head` is. A block is *complete* when full or sealed; only
//! complete blocks are written, each exactly once, in block order, so a block that a
//! sync made durable is never written again.
//!
//! Lock order: `io` -> `state`, `io` -> the log's `sticky` (a leaf). `state` is held
//! for memory work only (append, copying complete blocks out); `io` is held across
//! writes and syncs, so the background writer and `seal_and_sync` write blocks in
//! order. A failed write is made sticky under `io`, and every write pass checks the
//! sticky error under `io`: after a failure nothing is written again (no retry). `room` (a condvar on `state`) wakes
//! committers waiting for buffer or file space.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::Lsn;
use super::config::{Geometry, file_name};
use super::format::{
    BLOCK_BYTES, BLOCK_HEADER_BYTES, BlockHeader, EncodedRecords, NO_RECORD_START, PAYLOAD,
    PAYLOAD_BYTES, seal_block,
};
use crate::disk::io::DiskFile;
use crate::error::{NdbError, Result, codes};

/// Blocks copied out and written in one go (256 KB).
pub(crate) const WRITE_BATCH_BLOCKS: usize = 64;

/// A block in the buffer.
pub(crate) struct BufBlock {
    pub block_no: u64,
    /// Payload bytes (PAYLOAD_BYTES long).
    pub data: Box<[u8]>,
    pub used: u32,
    pub first_record_offset: u32,
    pub sealed: bool,
}

impl BufBlock {
    fn complete(&self) -> bool {
        self.sealed || self.used as usize == PAYLOAD_BYTES
    }
}

/// Positions and buffer of a part (under `Part::state`).
pub(crate) struct PartState {
    pub blocks: VecDeque<BufBlock>,
    spare: Vec<Box<[u8]>>,
    spare_limit: usize,
    pub head: Lsn,
    pub tail: Lsn,
    pub durable: Lsn,
    pub written_block: u64,
    pub high_file_bytes: u64,
    pub high_buffer_bytes: u64,
    /// Last fill level (in FILL_STEP_PERCENT steps) reported to the fill hook.
    pub fill_step: u32,
    pub fragments: u32,
    pub appended_bytes: u64,
    pub appended_records: u64,
    pub blocks_written: u64,
    /// LSNs skipped by seals (the unused rest of sealed blocks).
    pub padding_bytes: u64,
    pub writer_signalled: bool,
    pub waiters: u32,
}

impl PartState {
    /// A part whose next block starts at `head` (a block boundary), keeping up to
    /// `buffer_blocks` block buffers for reuse.
    pub fn new(head: Lsn, tail: Lsn, buffer_blocks: usize) -> PartState {
        assert_eq!(head % PAYLOAD, 0, "a part starts on a block boundary");
        assert!(tail <= head, "tail after head");
        PartState {
            blocks: VecDeque::new(),
            spare: Vec::new(),
            spare_limit: buffer_blocks,
            head,
            tail,
            durable: head,
            written_block: head / PAYLOAD,
            high_file_bytes: head - tail,
            high_buffer_bytes: 0,
            fill_step: 0,
            fragments: 0,
            appended_bytes: 0,
            appended_records: 0,
            blocks_written: 0,
            padding_bytes: 0,
            writer_signalled: false,
            waiters: 0,
        }
    }

    /// Start block `block_no`.
    fn push_block(&mut self, block_no: u64) {
        if let Some(b) = self.blocks.back() {
            assert!(b.complete(), "a new block after a complete one");
            assert_eq!(b.block_no + 1, block_no, "buffer blocks are consecutive");
        } else {
            assert_eq!(block_no, self.written_block, "first unwritten block");
        }
        let data = self
            .spare
            .pop()
            .unwrap_or_else(|| vec![0u8; PAYLOAD_BYTES].into_boxed_slice());
        self.blocks.push_back(BufBlock {
            block_no,
            data,
            used: 0,
            first_record_offset: NO_RECORD_START,
            sealed: false,
        });
    }

    /// Copy a batch into the buffer (never fails, never waits: the caller checked room).
    pub fn append(&mut self, records: &EncodedRecords) {
        let bytes = records.as_bytes();
        let mut off = 0;
        while off < bytes.len() {
            if self.blocks.back().is_none_or(BufBlock::complete) {
                assert_eq!(self.head % PAYLOAD, 0, "new block at a block boundary");
                self.push_block(self.head / PAYLOAD);
            }
            let Some(b) = self.blocks.back_mut() else {
                unreachable!("a block was just pushed");
            };
            let used = b.used as usize;
            let n = (PAYLOAD_BYTES - used).min(bytes.len() - off);
            if b.first_record_offset == NO_RECORD_START
                && let Some(s) = records.first_start_at_or_after(off)
                && s < off + n
            {
                b.first_record_offset = (used + s - off) as u32;
            }
            b.data[used..used + n].copy_from_slice(&bytes[off..off + n]);
            b.used += n as u32;
            off += n;
            self.head += n as u64;
        }
        self.appended_bytes += bytes.len() as u64;
        self.appended_records += records.len() as u64;
        self.high_file_bytes = self.high_file_bytes.max(self.head - self.tail);
        self.high_buffer_bytes = self.high_buffer_bytes.max(self.buffer_used_bytes());
    }

    /// Close the open block if it holds records: appending continues in a new block.
    pub fn seal(&mut self) {
        if let Some(b) = self.blocks.back_mut()
            && !b.complete()
            && b.used > 0
        {
            b.sealed = true;
            self.padding_bytes += u64::from(PAYLOAD_BYTES as u32 - b.used);
            self.head = (b.block_no + 1) * PAYLOAD;
        }
    }

    /// Bytes appended but not yet written.
    pub fn buffer_used_bytes(&self) -> u64 {
        self.head - self.written_block * PAYLOAD
    }

    /// Complete blocks not yet written.
    pub fn complete_blocks(&self) -> usize {
        match self.blocks.back() {
            Some(b) if !b.complete() => self.blocks.len() - 1,
            _ => self.blocks.len(),
        }
    }

    /// First block number that is not complete (everything below is writable).
    pub fn complete_end(&self) -> u64 {
        self.written_block + self.complete_blocks() as u64
    }

    /// LSN the ring can hold up to (exclusive) without overwriting the tail's block.
    pub fn file_limit(&self, geo: &Geometry) -> Lsn {
        (self.tail / PAYLOAD + geo.ring_blocks) * PAYLOAD
    }

    fn recycle_front(&mut self, n: usize) {
        for _ in 0..n {
            if let Some(b) = self.blocks.pop_front() {
                self.spare.push(b.data);
            }
        }
        self.written_block += n as u64;
        self.blocks_written += n as u64;
        // Keep a buffer's worth of block buffers: no allocation in steady state.
        self.spare.truncate(self.spare_limit);
    }
}

/// The part's files (under `Part::io`).
pub(crate) struct PartIo {
    pub files: Vec<Arc<dyn DiskFile>>,
    /// Checksum of the last block written (the next block's `prev_crc`).
    pub prev_crc: u32,
    dirty: Vec<bool>,
    scratch: Vec<u8>,
    /// Headers of the blocks in `scratch`.
    metas: Vec<BlockHeader>,
}

/// What a write pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WriteOutcome {
    pub blocks: u64,
    /// Complete blocks remain that the ring cannot take until the tail moves.
    pub blocked_on_space: bool,
}

/// One log part.
pub(crate) struct Part {
    pub no: u32,
    pub io: Mutex<PartIo>,
    pub state: Mutex<PartState>,
    pub room: Condvar,
}

impl Part {
    pub fn new(no: u32, files: Vec<Arc<dyn DiskFile>>, prev_crc: u32, st: PartState) -> Part {
        let n = files.len();
        Part {
            no,
            io: Mutex::new(PartIo {
                files,
                prev_crc,
                dirty: vec![false; n],
                scratch: Vec::new(),
                metas: Vec::new(),
            }),
            state: Mutex::new(st),
            room: Condvar::new(),
        }
    }

    /// Write complete blocks (in batches), at most up to block `upto` (exclusive), or
    /// all complete blocks when `upto` is None. Called with `io` held.
    ///
    /// A failed write ends all writing of the log: every pass first returns the log's
    /// `sticky` error if there is one (a write or sync failed, on any part and any
    /// thread), and its own write error is made sticky here, before `io` is released,
    /// so that no later pass writes again, not even a group commit that checked the
    /// sticky error before and was waiting for this lock (it would rewrite the failed
    /// blocks: never retry after EIO). The chain (`io.prev_crc`) moves only past
    /// blocks written successfully.
    pub fn write_out(
        &self,
        io: &mut PartIo,
        geo: &Geometry,
        upto: Option<u64>,
        sticky: &Mutex<Option<NdbError>>,
    ) -> Result<WriteOutcome> {
        let mut out = WriteOutcome::default();
        loop {
            if let Some(e) = &*sticky.lock() {
                return Err(e.clone());
            }
            let first_block;
            {
                let mut st = self.state.lock();
                st.writer_signalled = false;
                let limit_block = st.file_limit(geo) / PAYLOAD;
                let mut n = st.complete_blocks().min(WRITE_BATCH_BLOCKS);
                first_block = st.written_block;
                if let Some(u) = upto {
                    n = n.min(u.saturating_sub(first_block) as usize);
                }
                let fits = limit_block.saturating_sub(first_block) as usize;
                if n > fits {
                    out.blocked_on_space = true;
                    n = fits;
                }
                if n == 0 {
                    return Ok(out);
                }
                io.scratch.resize(n * BLOCK_BYTES, 0);
                io.metas.clear();
                for (i, b) in st.blocks.iter().take(n).enumerate() {
                    let dst =
                        &mut io.scratch[i * BLOCK_BYTES + BLOCK_HEADER_BYTES..][..PAYLOAD_BYTES];
                    dst[..b.used as usize].copy_from_slice(&b.data[..b.used as usize]);
                    let (file_no, page_no) = geo.location(b.block_no);
                    io.metas.push(BlockHeader {
                        part: self.no,
                        lsn: b.block_no * PAYLOAD,
                        used: b.used,
                        first_record_offset: b.first_record_offset,
                        prev_crc: 0,
                        file_no,
                        page_no,
                    });
                }
            }
            // Seal outside the lock, chaining each block to the previous one.
            let n = io.metas.len();
            let mut chain = io.prev_crc;
            for i in 0..n {
                io.metas[i].prev_crc = chain;
                let h = io.metas[i];
                chain = seal_block(&mut io.scratch[i * BLOCK_BYTES..][..BLOCK_BYTES], &h);
            }
            // One write per run of consecutive pages of one file.
            let mut i = 0;
            while i < n {
                let (file_no, page_no) = (io.metas[i].file_no, io.metas[i].page_no);
                let mut j = i + 1;
                while j < n
                    && io.metas[j].file_no == file_no
                    && io.metas[j].page_no == page_no + (j - i) as u32
                {
                    j += 1;
                }
                let f = &io.files[file_no as usize];
                let buf = &io.scratch[i * BLOCK_BYTES..j * BLOCK_BYTES];
                if let Err(e) = f.write_at(buf, u64::from(page_no) * BLOCK_BYTES as u64) {
                    let e = codes::file_system_error(format_args!(
                        "write of redo log {}: {e}",
                        file_name(self.no, file_no)
                    ));
                    keep_first_error(sticky, &e);
                    return Err(e);
                }
                io.dirty[file_no as usize] = true;
                i = j;
            }
            io.prev_crc = chain;
            {
                let mut st = self.state.lock();
                assert_eq!(st.written_block, first_block, "one writer at a time");
                st.recycle_front(n);
            }
            self.room.notify_all();
            out.blocks += n as u64;
        }
    }

    /// Hand out the files written since the last sync (to be fdatasynced now).
    pub fn take_dirty(&self, io: &mut PartIo, out: &mut Vec<DirtyFile>) {
        for (i, d) in io.dirty.iter_mut().enumerate() {
            if std::mem::take(d) {
                out.push(DirtyFile {
                    part: self.no,
                    file_no: i as u32,
                    file: io.files[i].clone(),
                });
            }
        }
    }
}

/// Keep `e` as the log's sticky error unless an earlier one is kept.
pub(crate) fn keep_first_error(sticky: &Mutex<Option<NdbError>>, e: &NdbError) {
    let mut s = sticky.lock();
    if s.is_none() {
        *s = Some(e.clone());
    }
}

/// A file to fdatasync.
pub(crate) struct DirtyFile {
    pub part: u32,
    pub file_no: u32,
    pub file: Arc<dyn DiskFile>,
}

/// Threads fdatasyncing at once (the caller's included).
const SYNC_THREADS: usize = 8;

/// fdatasync the files, in parallel when there are several (up to [`SYNC_THREADS`]
/// threads, the caller's among them); every file is synced once, the first error is
/// returned.
pub(crate) fn sync_files(files: &[DirtyFile]) -> Result<()> {
    let sync_stride = |start: usize, k: usize| -> Result<()> {
        let mut result = Ok(());
        for f in files.iter().skip(start).step_by(k) {
            let r = f.file.sync_data().map_err(|e| {
                codes::file_system_error(format_args!(
                    "fdatasync of redo log {}: {e}",
                    file_name(f.part, f.file_no)
                ))
            });
            if result.is_ok() {
                result = r;
            }
        }
        result
    };
    let k = files.len().min(SYNC_THREADS);
    if k <= 1 {
        return sync_stride(0, 1);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = (1..k).map(|t| s.spawn(move || sync_stride(t, k))).collect();
        let mut result = sync_stride(0, k);
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(codes::internal("fdatasync thread panicked")));
            if result.is_ok() {
                result = r;
            }
        }
        result
    })
}
