//! The REDO log of a data node (NDB's DBLQH fragment log): committed changes, written
//! at commit into a buffer, made durable by the global checkpoint (group commit), and
//! replayed at system restart on top of the local checkpoints. Byte layout and design:
//! `docs/redo-log.md`.
//!
//! - NoOfFragmentLogParts *parts*; each fragment logs to one part ([`RedoLog::assign_part`],
//!   chosen by load). A part is a ring of NoOfFragmentLogFiles preallocated files of
//!   FragmentLogFileSize (`D<8+part>/DBLQH/S<n>.FragLog`, NDB's names) and a share of
//!   RedoBuffer.
//! - [`Lsn`]: per part, the position in the part's stream of 4 KB blocks' payloads
//!   (block `k` holds LSNs `k x 4048 ..`); it starts at 0 and never wraps; the ring
//!   position is `block mod ring_blocks`.
//! - Commit path: [`EncodedRecords`] are built without locks, [`RedoLog::wait_for_room`]
//!   applies back-pressure (1221 buffer / 410 files after RedoOverCommitLimit), and
//!   [`RedoLog::append`] copies the batch into the part's buffer under its mutex.
//! - A background writer thread writes complete blocks; [`RedoLog::seal_and_sync`]
//!   seals every part's open block (padding it: it is never rewritten), writes the rest
//!   and fdatasyncs (the GCP's group commit). [`RedoLog::release_before`] frees space
//!   after a local checkpoint.
//! - [`replay`] reads the parts back at system restart, verifying every checksum, and
//!   hands the records to the caller merged by GCI; [`RedoLog::open`] then continues
//!   after the valid log and records a *restart cut* so that what was written after
//!   the restart point is never replayed again (`restarts.rs`).
//!
//! Invariants: per part `tail <= head` and `durable <= head`; the writer never writes a block at
//! or beyond `tail / PAYLOAD + ring_blocks` (a committer that appended without room
//! leaves its blocks in the buffer until a checkpoint releases space), so live blocks
//! are never overwritten; a block is written once, so a durable block is never
//! rewritten; the first I/O error is sticky (returned by every later `seal_and_sync`;
//! an fsync is never retried).
//!
//! Lock order: `assign` -> part `io` (several only in part order: `seal_and_sync`
//! holds every part's until the sync) -> part `state` (never two at once) -> writer
//! `ctl`; `sticky` and `hook` are leaves. No lock is held while the fill hook runs.

mod config;
mod format;
mod open;
mod part;
mod replay;
mod restarts;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_crash;
#[cfg(test)]
mod tests_replay;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use crate::disk::io::FileSystem;
use crate::error::{NdbError, Result, codes};

pub use config::{MAX_LOG_PARTS, RedoConfig, file_path, part_dir};
pub use format::{
    BLOCK_BYTES, EncodedRecords, MAX_RECORD_PAYLOAD_BYTES, PAYLOAD_BYTES, RecordHeader, encoded_len,
};
pub use replay::{PartReplayStats, ReplayStats, replay};

use config::{Geometry, file_name};
use format::{FileHeader, PAYLOAD, encode_file_header};
use part::{Part, PartState, WRITE_BATCH_BLOCKS};
use writer::WriterCtl;

/// Position in one part's log (see the module doc).
pub type Lsn = u64;

/// The fill hook: `(part, percent of the part's files in use)`.
pub type FillHook = dyn Fn(u32, u32) + Send + Sync;

/// The fill hook is called each time a part's use crosses a multiple of this.
pub const FILL_STEP_PERCENT: u32 = 10;

/// One part's space, for ndbinfo.logspaces and ndbinfo.logbuffers (log_type REDO).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartUsage {
    pub part: u32,
    /// Log bytes the part's files hold (payload of every block of the ring).
    pub total_file_bytes: u64,
    /// head - tail.
    pub used_file_bytes: u64,
    pub high_file_bytes: u64,
    /// Log bytes the part's buffer holds.
    pub buffer_capacity_bytes: u64,
    /// Appended but not yet written.
    pub buffer_used_bytes: u64,
    pub buffer_high_bytes: u64,
    /// Fragments assigned to the part.
    pub fragments: u32,
}

/// Counters since the log was created or opened (all parts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedoCounters {
    pub records: u64,
    pub record_bytes: u64,
    pub blocks_written: u64,
    /// Bytes of sealed blocks left unused (the cost of group commits).
    pub padding_bytes: u64,
    /// `seal_and_sync` calls that succeeded.
    pub group_commits: u64,
    pub fdatasyncs: u64,
    /// `wait_for_room` calls that had to wait for the buffer / for file space.
    pub buffer_waits: u64,
    pub file_waits: u64,
    /// `wait_for_room` calls that gave up with 1221 / 410.
    pub buffer_overloads: u64,
    pub file_overloads: u64,
}

#[derive(Default)]
struct Counters {
    group_commits: AtomicU64,
    fdatasyncs: AtomicU64,
    buffer_waits: AtomicU64,
    file_waits: AtomicU64,
    buffer_overloads: AtomicU64,
    file_overloads: AtomicU64,
    /// Commits waiting for file space now, over all parts (read without a lock by
    /// [`RedoLog::commits_wait_for_files`]).
    file_waiters_now: AtomicU64,
}

pub(crate) struct Inner {
    pub cfg: RedoConfig,
    pub geo: Geometry,
    pub parts: Vec<Part>,
    pub ctl: Mutex<WriterCtl>,
    pub ctl_cv: Condvar,
    pub sticky: Mutex<Option<NdbError>>,
    hook: RwLock<Option<Arc<FillHook>>>,
    assign: Mutex<()>,
    counters: Counters,
}

impl Inner {
    pub fn set_sticky(&self, e: NdbError) {
        part::keep_first_error(&self.sticky, &e);
    }

    fn check_sticky(&self) -> Result<()> {
        match &*self.sticky.lock() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn fire_hook(&self, part: u32, percent: u32) {
        let hook = self.hook.read().clone();
        if let Some(h) = hook {
            h(part, percent);
        }
    }

    fn percent_used(&self, st: &PartState) -> u32 {
        ((st.head - st.tail) * 100 / self.geo.capacity_bytes()) as u32
    }
}

/// The REDO log of one data node. Shared as `Arc`; every method takes `&self`.
pub struct RedoLog {
    inner: Arc<Inner>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

pub(crate) fn io_error(what: &str, part: u32, file_no: u32, e: std::io::Error) -> NdbError {
    codes::file_system_error(format_args!(
        "{what} redo log {}: {e}",
        file_name(part, file_no)
    ))
}

impl RedoLog {
    /// Initial start: create the part directories and files under `dir` (the node's
    /// file system directory) and write their headers (fdatasynced, in parallel); 760
    /// if a log file or restarts file exists, 1509 if a file cannot be created (the
    /// files created so far are removed).
    pub fn create(fs: Arc<dyn FileSystem>, dir: &Path, cfg: RedoConfig) -> Result<Arc<RedoLog>> {
        let geo = cfg.geometry()?;
        for p in 0..geo.parts {
            let cuts = restarts::path(dir, p);
            for path in (0..geo.files_per_part)
                .map(|f| file_path(dir, p, f))
                .chain([cuts])
            {
                if fs.exists(&path) {
                    return Err(codes::file_exists(path.display()));
                }
            }
        }
        let mut created = Vec::new();
        let mut parts = Vec::new();
        let geo_init_full = cfg.init_full;
        let mut to_sync = Vec::new();
        let r = (|| -> Result<()> {
            for p in 0..geo.parts {
                let pdir = part_dir(dir, p);
                fs.create_dir_all(&pdir).map_err(|e| {
                    codes::file_system_error(format_args!("create {}: {e}", pdir.display()))
                })?;
                let mut files = Vec::new();
                for f in 0..geo.files_per_part {
                    let path = file_path(dir, p, f);
                    // InitFragmentLogFiles: full allocates the file's blocks now (a full
                    // disk is reported at the initial start), sparse only sets its size.
                    let file = if geo_init_full {
                        fs.create(&path, geo.file_size_bytes)
                    } else {
                        fs.create_sparse(&path, geo.file_size_bytes)
                    }
                    .map_err(|e| io_error("create", p, f, e))?;
                    created.push(path);
                    let header = encode_file_header(&FileHeader {
                        part: p,
                        file_no: f,
                        files_per_part: geo.files_per_part,
                        file_size_bytes: geo.file_size_bytes,
                    });
                    file.write_at(&header, 0)
                        .map_err(|e| io_error("write header of", p, f, e))?;
                    to_sync.push(part::DirtyFile {
                        part: p,
                        file_no: f,
                        file: file.clone(),
                    });
                    files.push(file);
                }
                parts.push(Part::new(
                    p,
                    files,
                    0,
                    PartState::new(0, 0, geo.buffer_blocks),
                ));
            }
            part::sync_files(&to_sync)
        })();
        if let Err(e) = r {
            for path in &created {
                let _ = fs.remove(path);
            }
            return Err(e);
        }
        Self::start(cfg, geo, parts)
    }

    /// After recovery: reopen the files and continue appending after `head[part]` (the
    /// end returned by [`replay`]), with `tail[part]` the oldest LSN still needed.
    /// Appending resumes in a fresh block after whatever valid log follows `head`; the
    /// records in between are void from now on (`docs/redo-log.md` §5), recorded in the
    /// part's `RedoRestarts` file before anything else is written.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        cfg: RedoConfig,
        tail: &[Lsn],
        head: &[Lsn],
    ) -> Result<Arc<RedoLog>> {
        let geo = cfg.geometry()?;
        if tail.len() != geo.parts as usize || head.len() != geo.parts as usize {
            return Err(codes::bad_argument(format_args!(
                "redo log open with {} tails and {} heads for {} parts",
                tail.len(),
                head.len(),
                geo.parts
            )));
        }
        let mut parts = Vec::new();
        for p in 0..geo.parts {
            let files = open::open_part_files(&*fs, dir, &geo, p)?;
            let (t, h) = (tail[p as usize], head[p as usize]);
            if t > h || h > (t / PAYLOAD + geo.ring_blocks) * PAYLOAD {
                return Err(codes::bad_argument(format_args!(
                    "redo log part {p}: tail {t} and head {h} do not fit the ring"
                )));
            }
            let (st, prev_crc) = open::position(&*fs, dir, &files, &geo, p, t, h)?;
            parts.push(Part::new(p, files, prev_crc, st));
        }
        Self::start(cfg, geo, parts)
    }

    fn start(cfg: RedoConfig, geo: Geometry, parts: Vec<Part>) -> Result<Arc<RedoLog>> {
        let inner = Arc::new(Inner {
            cfg,
            geo,
            parts,
            ctl: Mutex::new(WriterCtl::default()),
            ctl_cv: Condvar::new(),
            sticky: Mutex::new(None),
            hook: RwLock::new(None),
            assign: Mutex::new(()),
            counters: Counters::default(),
        });
        let handle = writer::spawn(inner.clone())?;
        Ok(Arc::new(RedoLog {
            inner,
            writer: Mutex::new(Some(handle)),
        }))
    }

    /// Whether a REDO log exists under `dir` (part 0's first file).
    pub fn exists(fs: &dyn FileSystem, dir: &Path) -> bool {
        fs.exists(&file_path(dir, 0, 0))
    }

    /// Initial start: remove every REDO log file under `dir` (whatever the geometry it
    /// was created with) and the restart cuts; returns the paths removed.
    pub fn remove_files(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<std::path::PathBuf>> {
        let mut removed = Vec::new();
        let mut remove = |path: std::path::PathBuf| -> Result<()> {
            fs.remove(&path).map_err(|e| {
                codes::file_system_error(format_args!("remove {}: {e}", path.display()))
            })?;
            removed.push(path);
            Ok(())
        };
        for p in 0..MAX_LOG_PARTS {
            let mut f = 0;
            while fs.exists(&file_path(dir, p, f)) {
                remove(file_path(dir, p, f))?;
                f += 1;
            }
            let cuts = restarts::path(dir, p);
            if fs.exists(&cuts) {
                remove(cuts)?;
            }
        }
        Ok(removed)
    }

    pub fn parts(&self) -> u32 {
        self.inner.geo.parts
    }

    pub fn config(&self) -> &RedoConfig {
        &self.inner.cfg
    }

    /// The part a new fragment logs to: the part whose files are least used (in steps
    /// of 1/16 of the ring, so that small differences do not matter), then the one
    /// with the fewest fragments, then the lowest number. Records the assignment.
    /// Never `fragment_id % parts`: a busy fragment must not fill one part while the
    /// others idle (error 410).
    pub fn assign_part(&self) -> u32 {
        let _g = self.inner.assign.lock();
        let cap = self.inner.geo.capacity_bytes();
        let mut best: Option<((u64, u32), usize)> = None;
        for (i, p) in self.inner.parts.iter().enumerate() {
            let st = p.state.lock();
            let key = ((st.head - st.tail) * 16 / cap, st.fragments);
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, i));
            }
        }
        let Some((_, i)) = best else {
            unreachable!("a redo log has at least one part");
        };
        self.inner.parts[i].state.lock().fragments += 1;
        i as u32
    }

    /// A fragment of `part` was dropped.
    pub fn unassign_part(&self, part: u32) {
        let _g = self.inner.assign.lock();
        if let Some(p) = self.inner.parts.get(part as usize) {
            let mut st = p.state.lock();
            st.fragments = st.fragments.saturating_sub(1);
        }
    }

    /// Back-pressure before a commit: waits while the part's buffer lacks `bytes` (at
    /// most half the buffer is asked for) or its files lack `bytes` plus the reserve
    /// beyond the tail. After RedoOverCommitLimit: 410 (files) or 1221 (buffer). 1220
    /// when `bytes` can never fit. Returns at once when there is room.
    pub fn wait_for_room(&self, part: u32, bytes: usize) -> Result<()> {
        self.wait_for_room_within(part, bytes, self.inner.cfg.overload_limit_ms)
    }

    /// [`RedoLog::wait_for_room`] waiting at most `max_wait_ms` (at most
    /// RedoOverCommitLimit) before 410/1221: for a waiter that must not be held up
    /// long (a data node's worker thread, which the node's loop hands work to).
    pub fn wait_for_room_within(&self, part: u32, bytes: usize, max_wait_ms: u64) -> Result<()> {
        let inner = &*self.inner;
        let max_wait_ms = max_wait_ms.min(inner.cfg.overload_limit_ms);
        let geo = &inner.geo;
        let Some(p) = inner.parts.get(part as usize) else {
            return Err(codes::bad_argument(format_args!("redo log part {part}")));
        };
        let bytes = bytes as u64;
        let reserve = geo.reserve_blocks * PAYLOAD;
        if bytes + reserve > geo.capacity_bytes() {
            return Err(codes::redo_log_files_too_small(format_args!(
                "{bytes} bytes for a log part of {} bytes",
                geo.capacity_bytes()
            )));
        }
        let buf_cap = geo.buffer_blocks as u64 * PAYLOAD;
        let need_buf = bytes.min(buf_cap / 2);
        let mut st = p.state.lock();
        let mut deadline: Option<Instant> = None;
        let mut hooked = false;
        loop {
            let file_ok = st.head + bytes + reserve <= st.file_limit(geo);
            let buf_ok = st.buffer_used_bytes() + need_buf <= buf_cap;
            if file_ok && buf_ok {
                return Ok(());
            }
            let now = Instant::now();
            let dl = *deadline.get_or_insert_with(|| {
                let waits = match file_ok {
                    true => &inner.counters.buffer_waits,
                    false => &inner.counters.file_waits,
                };
                waits.fetch_add(1, Ordering::Relaxed);
                now + Duration::from_millis(max_wait_ms)
            });
            if now >= dl {
                let detail = format_args!(
                    "part {part}: {bytes} bytes wanted, files {} of {} used, buffer {} of {} used",
                    st.head - st.tail,
                    geo.capacity_bytes(),
                    st.buffer_used_bytes(),
                    buf_cap
                );
                let (counter, e) = if file_ok {
                    let c = &inner.counters.buffer_overloads;
                    (c, codes::redo_buffers_overloaded(detail))
                } else {
                    let c = &inner.counters.file_overloads;
                    (c, codes::redo_log_files_overloaded(detail))
                };
                counter.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
            if !buf_ok {
                st.writer_signalled = true;
                writer::signal(inner);
            }
            if !file_ok && !hooked {
                hooked = true;
                let pct = inner.percent_used(&st);
                MutexGuard::unlocked(&mut st, || inner.fire_hook(part, pct));
                continue;
            }
            st.waiters += 1;
            let waiters_now = &inner.counters.file_waiters_now;
            if !file_ok {
                waiters_now.fetch_add(1, Ordering::AcqRel);
            }
            p.room.wait_until(&mut st, dl);
            st.waiters -= 1;
            if !file_ok {
                waiters_now.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Whether some commit is waiting for file space in a part (its redo log is full
    /// until a local checkpoint releases some): checkpoints then write unpaced.
    pub fn commits_wait_for_files(&self) -> bool {
        self.inner.counters.file_waiters_now.load(Ordering::Acquire) > 0
    }

    /// Copy the records into the part's buffer under the part's mutex and return the
    /// LSN after the last one. Never waits for space and never fails (the buffer may
    /// overshoot by what concurrent committers reserved). Panics on a part number out
    /// of range (a caller bug).
    pub fn append(&self, part: u32, records: &EncodedRecords) -> Lsn {
        let inner = &*self.inner;
        let p = &inner.parts[part as usize];
        let threshold = (WRITE_BATCH_BLOCKS / 4)
            .min(inner.geo.buffer_blocks / 2)
            .max(1);
        let (end, wake, fill) = {
            let mut st = p.state.lock();
            if records.is_empty() {
                return st.head;
            }
            st.append(records);
            let wake = !st.writer_signalled && st.complete_blocks() >= threshold;
            if wake {
                st.writer_signalled = true;
            }
            let pct = inner.percent_used(&st);
            let fill = (pct / FILL_STEP_PERCENT > st.fill_step).then(|| {
                st.fill_step = pct / FILL_STEP_PERCENT;
                pct
            });
            (st.head, wake, fill)
        };
        if wake {
            writer::signal(inner);
        }
        if let Some(pct) = fill {
            inner.fire_hook(part, pct);
        }
        end
    }

    /// Group commit: seal every part at its current end, write everything buffered up
    /// to there, fdatasync every file written; returns per part the LSN below which
    /// everything is durable. An I/O error is returned and kept (sticky): the caller
    /// stops the node. 410 if a part's files stay full past RedoOverCommitLimit.
    pub fn seal_and_sync(&self) -> Result<Vec<Lsn>> {
        let inner = &*self.inner;
        inner.check_sticky()?;
        // Seal and write every part, keeping its io lock (taken in part order) until
        // its files are synced, so that nothing is written between write and sync.
        let mut guards = Vec::with_capacity(inner.parts.len());
        for p in &inner.parts {
            let mut io = p.io.lock();
            if let Err(e) = self.write_sealed(p, &mut io) {
                if e.code != 410 {
                    inner.set_sticky(e.clone());
                }
                return Err(e);
            }
            guards.push(io);
        }
        // fdatasync every file written since the last sync, the files in parallel.
        let mut files = Vec::new();
        for (p, io) in inner.parts.iter().zip(guards.iter_mut()) {
            p.take_dirty(io, &mut files);
        }
        if let Err(e) = part::sync_files(&files) {
            inner.set_sticky(e.clone());
            return Err(e);
        }
        // Still holding every part's io lock: a write that failed on another thread
        // since this group commit began is sticky by now, and nothing is acknowledged.
        inner.check_sticky()?;
        let c = &inner.counters;
        c.fdatasyncs
            .fetch_add(files.len() as u64, Ordering::Relaxed);
        c.group_commits.fetch_add(1, Ordering::Relaxed);
        let durable = inner
            .parts
            .iter()
            .map(|p| {
                let mut st = p.state.lock();
                st.durable = st.durable.max(st.written_block * PAYLOAD);
                st.durable
            })
            .collect();
        drop(guards);
        Ok(durable)
    }

    /// Seal part `p` and write its blocks up to the seal, waiting for ring space up to
    /// RedoOverCommitLimit (then 410). Called with `p.io` held.
    fn write_sealed(&self, p: &Part, io: &mut part::PartIo) -> Result<()> {
        let inner = &*self.inner;
        let upto = {
            let mut st = p.state.lock();
            st.seal();
            st.complete_end()
        };
        let mut deadline: Option<Instant> = None;
        loop {
            let o = p.write_out(io, &inner.geo, Some(upto), &inner.sticky)?;
            let mut st = p.state.lock();
            if st.written_block >= upto {
                return Ok(());
            }
            if !o.blocked_on_space {
                continue;
            }
            let now = Instant::now();
            let dl = *deadline
                .get_or_insert_with(|| now + Duration::from_millis(inner.cfg.overload_limit_ms));
            if now >= dl {
                return Err(codes::redo_log_files_overloaded(format_args!(
                    "part {}: the ring is full up to the tail at {}",
                    p.no, st.tail
                )));
            }
            p.room.wait_until(&mut st, dl);
        }
    }

    /// A local checkpoint no longer needs anything before `lsn` (clamped to the head):
    /// the blocks wholly before it may be reused. The tail never moves back.
    pub fn release_before(&self, part: u32, lsn: Lsn) {
        let inner = &*self.inner;
        let Some(p) = inner.parts.get(part as usize) else {
            return;
        };
        {
            let mut st = p.state.lock();
            let lsn = lsn.min(st.head);
            if lsn > st.tail {
                st.tail = lsn;
                st.fill_step = inner.percent_used(&st) / FILL_STEP_PERCENT;
            }
        }
        p.room.notify_all();
        writer::signal(inner);
    }

    /// Per part: where the next record goes.
    pub fn head(&self) -> Vec<Lsn> {
        self.inner
            .parts
            .iter()
            .map(|p| p.state.lock().head)
            .collect()
    }

    /// Per part: the oldest LSN still needed.
    pub fn tail(&self) -> Vec<Lsn> {
        self.inner
            .parts
            .iter()
            .map(|p| p.state.lock().tail)
            .collect()
    }

    /// Per part: everything below is durable (as of the last `seal_and_sync`).
    pub fn durable(&self) -> Vec<Lsn> {
        self.inner
            .parts
            .iter()
            .map(|p| p.state.lock().durable)
            .collect()
    }

    /// Counters since the log was created or opened.
    pub fn counters(&self) -> RedoCounters {
        let c = &self.inner.counters;
        let mut out = RedoCounters {
            group_commits: c.group_commits.load(Ordering::Relaxed),
            fdatasyncs: c.fdatasyncs.load(Ordering::Relaxed),
            buffer_waits: c.buffer_waits.load(Ordering::Relaxed),
            file_waits: c.file_waits.load(Ordering::Relaxed),
            buffer_overloads: c.buffer_overloads.load(Ordering::Relaxed),
            file_overloads: c.file_overloads.load(Ordering::Relaxed),
            ..RedoCounters::default()
        };
        for p in &self.inner.parts {
            let st = p.state.lock();
            out.records += st.appended_records;
            out.record_bytes += st.appended_bytes;
            out.blocks_written += st.blocks_written;
            out.padding_bytes += st.padding_bytes;
        }
        out
    }

    /// Per part: file and buffer space (ndbinfo.logspaces / logbuffers).
    pub fn usage(&self) -> Vec<PartUsage> {
        let geo = &self.inner.geo;
        self.inner
            .parts
            .iter()
            .map(|p| {
                let st = p.state.lock();
                PartUsage {
                    part: p.no,
                    total_file_bytes: geo.capacity_bytes(),
                    used_file_bytes: st.head - st.tail,
                    high_file_bytes: st.high_file_bytes,
                    buffer_capacity_bytes: geo.buffer_blocks as u64 * PAYLOAD,
                    buffer_used_bytes: st.buffer_used_bytes(),
                    buffer_high_bytes: st.high_buffer_bytes,
                    fragments: st.fragments,
                }
            })
            .collect()
    }

    /// Called (from the appending thread, no lock held) each time a part's used file
    /// space reaches a new multiple of [`FILL_STEP_PERCENT`] (re-armed when released),
    /// and when `wait_for_room` has to wait for file space, so that the checkpoint side
    /// can start a local checkpoint.
    pub fn set_fill_hook(&self, hook: Box<FillHook>) {
        *self.inner.hook.write() = Some(Arc::from(hook));
    }

    /// Stop the writer thread after it wrote out the buffer (sealing the open blocks;
    /// no fdatasync: call `seal_and_sync` for that). Also done on drop.
    pub fn shutdown(&self) {
        let handle = self.writer.lock().take();
        if let Some(h) = handle {
            writer::stop(&self.inner);
            let _ = h.join();
        }
    }
}

impl Drop for RedoLog {
    fn drop(&mut self) {
        self.shutdown();
    }
}
