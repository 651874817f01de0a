//! Local checkpoints of the embedded cluster (DBDIH + BACKUP's LCP), and the restore of
//! fragments from them at a system restart.
//!
//! One LCP round ([`ClusterInner::run_lcp`]), every data node at once:
//! 1. each node's redo head is taken as its LCP's *keep* position: every commit whose
//!    redo record lies before it is already in memory, so the scans below see it; then
//!    an `LcpStart` undo record marks where a restart brings the disk pages back to
//!    (docs/durability.md §7); the fragment replicas with no change since their
//!    previous LCP are idle (nothing written, their chain stays);
//! 2. every other fragment replica of a logged table gets a data file (the spare step
//!    6 of the previous round made, or a new one), and is scanned into it in batches
//!    of pages (its mutex held per batch only; I/O outside it): the parts the
//!    partial-LCP rule chooses in full, the others as changes since the previous LCP (`txn::fragment::lcp`). A node scans one fragment at a time (as
//!    NDB's LDM thread), paced per node; the file work runs on a pool of
//!    [`LCP_IO_THREADS`] (NDB's NDBFS threads), so that files are created while the
//!    fragments scan and the nodes scan at the same time. Rows are encoded straight
//!    into the file's blocks under the mutex (`checkpoint::LcpBlocks`) and the blocks
//!    written after each batch, their write-back started at once;
//! 3. each data file is finished and fdatasynced as soon as its fragment is scanned
//!    (while the node's next fragment scans), and once the last scan ends a global
//!    checkpoint makes everything the files hold durable in the redo log too (a
//!    checkpoint never holds a change a restart would not also replay). The rule: the
//!    rows carry their GCIs, but a deleted row (a delete marker, or a row just absent
//!    from an ALL part) names none, so the GCI current at the end of the scans is
//!    closed whenever a data file was written — unless no change at all was made
//!    since the last durable checkpoint (`GlobalCheckpoint::changes_durable`: no
//!    commit entered, no sweep or move stamped a newer number), when every row and
//!    every absence the scans saw is already restorable;
//! 4. only when both are done, each node's page cache and extent headers are flushed
//!    and synced (the disk pages hold every change before its `LcpStart` record), then
//!    each fragment's control file is stored (all at once) and the data files its
//!    chain no longer needs are removed;
//! 5. each node's system file takes the keep position and the undo keep at the next
//!    global checkpoint, after which the redo and the undo log before them are
//!    released. A replica discarded since the round planned it (its node stopped) has
//!    nothing stored in step 4 (its file is removed), and its node's keep does not
//!    move: the node's chains and keep stay as they were before its stop, for its
//!    restart from its own files (`node_restart_own`);
//! 6. the round is complete (`LcpStats::elapsed_ms` ends here); then the next round's
//!    data files are made ahead, empty: a *spare* `{next lcp_id}.data` for every
//!    fragment replica that wrote a file (the ones likely to write again), and an idle
//!    fragment's unused spare is renamed on to the next id. Step 2 then writes into
//!    the spare instead of creating a file (a file sync and a directory sync, two
//!    journal commits, before its first write). A spare is an empty file no control
//!    file names: a restart removes it as an orphan, a dropped table's files go with
//!    it, an initial start removes it with every checkpoint file.
//!
//! The file work of steps 2 to 4 may interleave differently from run to run (threads);
//! what a crash leaves does not depend on it: a control file is stored only after every
//! data file and the checkpoint of step 3 are durable, and each fragment's control file
//! names only its own files. `LcpStats` times each step (`scan_us`, `sync_us`, `gcp_us`,
//! `control_us`).
//!
//! Checkpoint writes are paced between MinDiskWriteSpeed and MaxDiskWriteSpeed by how
//! full the redo log is; a round asked for by the node's own restart
//! ([`ClusterInner::request_lcp`]) runs at MaxDiskWriteSpeedOwnRestart (default 200M), as
//! NDB's does; and while any commit waits for redo file space (which only a completed
//! round releases) the round writes unpaced, at disk speed, so that the wait ends before
//! RedoOverCommitLimit turns it into 410. An LCP starts when TimeBetweenLocalCheckpoints' worth of redo
//! (4 × 2^n bytes) was written since the previous one started, and at once when a redo
//! part passes half full (the redo fill hook wakes the driver); the cluster log records
//! each (`Local checkpoint 13 started. Keep GCI = ... oldest restorable GCI = ...`,
//! `Local checkpoint 13 completed`).
//!
//! A round that fails (a data or control file cannot be written) changes nothing a
//! restart reads: the previous control files and keep stay; the fragments it scanned
//! (whose change maps it took) are written in full by their next LCP. The LCP driver
//! stops the cluster on such a failure, as NDB's node would; an explicit
//! [`ClusterInner::run_lcp`] returns the error (an LCP file's failed fdatasync poisons
//! only that file, which nothing will ever read, unlike the redo log's).
//!
//! Lock order: `lcp_lock` (one round at a time), then a node's scan turn
//! (`NodeRound::scan`), then fragment mutexes one at a time (a thread holds at most one).

use super::cluster::{ClusterInner, DataNode};
use super::dict::TableRuntime;
use crate::checkpoint::{
    ChangeStats, DataFileRef, DiskWritePacer, FragControl, LcpBlocks, LcpFileWriter,
    PartialLcpConfig, RestoreTarget, begin_lcp, choose_all_parts, create_spare, data_file_path,
    lcp_all_range, lcp_dir, part_of_page, remove_orphans, restore_fragment,
};
use crate::checkpoint::{LCP_IO_THREADS, run_parallel};
use crate::error::Result;
use crate::mgm::log::Severity;
use crate::txn::FragmentCell;
use crate::txn::fragment::{Fragment, LcpSink, ScanCursor, push_row_image};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How far ahead of the pool's high-water mark a restore's DataMemory is committed
/// ([`populate_ahead`]): 256 MiB, in steps of 64 MiB.
const POPULATE_AHEAD_PAGES: u32 = 8192;
const POPULATE_STEP_PAGES: u32 = 2048;

/// Most threads a node's replicas restore on; fewer on a machine with fewer cores.
const MAX_RESTORE_THREADS: usize = 4;

/// Threads a restore of a node's replicas runs on: one per core, at most
/// [`MAX_RESTORE_THREADS`].
pub(crate) fn restore_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(MAX_RESTORE_THREADS)
}

/// What [`ClusterInner::restore_node_fragments`] did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NodeRestore {
    pub fragments: u64,
    pub rows: u64,
    /// Highest LCP id of the control files.
    pub max_lcp_id: u32,
    /// DataMemory pages the helper thread committed, and its CPU time.
    pub populated_pages: u64,
    pub populate_cpu_secs: f64,
    /// CPU time of the restore's threads, summed.
    pub restore_cpu_secs: f64,
}

/// Commits `pool`'s pages ahead of its high-water mark until `done` (a restore is
/// running: pages are handed out from the lowest address, so the pages the restore
/// will take next are the ones just above the mark). Stops early when the kernel
/// refuses; at most [`POPULATE_AHEAD_PAGES`] pages beyond what the restore used are
/// committed for nothing. Returns the pages committed and the thread's CPU time.
fn populate_ahead(pool: &crate::storage::PagePool, done: &AtomicBool) -> (u64, f64) {
    let cpu0 = thread_cpu_secs();
    let mut populated = 0u64;
    let mut next = 0u32;
    while !done.load(Ordering::Acquire) {
        let mark = u32::try_from(pool.high_water_pages()).unwrap_or(u32::MAX);
        let target = mark
            .saturating_add(POPULATE_AHEAD_PAGES)
            .min(pool.total_pages());
        next = next.max(mark);
        if next >= target {
            std::thread::sleep(Duration::from_micros(500));
            continue;
        }
        let n = POPULATE_STEP_PAGES.min(target - next);
        if !pool.populate(next, n) {
            break;
        }
        populated += u64::from(n);
        next += n;
    }
    (populated, thread_cpu_secs() - cpu0)
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`), in seconds; 0 when the
/// clock is not there.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Pages scanned per hold of a fragment's mutex.
const LCP_BATCH_PAGES: u32 = 8;

/// Most bytes a fragment's scan holds in memory while its data file is being created.
const LCP_BUFFER_BEFORE_FILE_BYTES: usize = 8 << 20;

/// What one LCP round wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LcpStats {
    pub lcp_id: u32,
    pub fragments: u64,
    pub fragments_idle: u64,
    pub rows: u64,
    pub deletes: u64,
    pub pages_skipped: u64,
    pub bytes: u64,
    pub elapsed_ms: u64,
    /// The same in microseconds.
    pub elapsed_us: u64,
    /// Step 2's wall time: data files created and fragments scanned into them, until
    /// the last scan ended (the first files are already syncing by then).
    pub scan_us: u64,
    /// The scans themselves (a node's scan turn held), summed over fragments (the
    /// nodes scan at the same time).
    pub scan_turn_us: u64,
    /// Creating the data files (a file and a directory sync each), summed over
    /// fragments (they overlap each other and other fragments' scans).
    pub create_us: u64,
    /// Step 3's wall time, from the end of the last scan: the last data files
    /// finished and fdatasynced, while the global checkpoint runs.
    pub sync_us: u64,
    /// The global checkpoint of step 3 (0 when none was needed).
    pub gcp_us: u64,
    /// Step 3 ran a global checkpoint (false: every change the scans could see was
    /// durable already, or nothing was scanned).
    pub gcp_forced: bool,
    /// Step 4's wall time: control files stored, dropped data files removed.
    pub control_us: u64,
    /// After the round completed (not in `elapsed_ms`): the next round's spare data
    /// files created or renamed on (step 6).
    pub spare_us: u64,
    /// Data files of this round written into a spare made by the previous round.
    pub spares_used: u64,
}

impl LcpStats {
    fn set_elapsed(&mut self, elapsed: Duration) {
        self.elapsed_ms = elapsed.as_millis() as u64;
        self.elapsed_us = elapsed.as_micros() as u64;
    }
}

/// The scan's sink: each record is encoded straight into the data file's blocks
/// (one copy, from the fragment's pages), under the fragment's mutex; the blocks are
/// written after it is released.
struct BlockSink<'a>(&'a mut LcpBlocks);

impl LcpSink for BlockSink<'_> {
    fn row(&mut self, row_id: u32, fixed: &[u8], var: &[u8]) {
        // The image of a redo record: three length words and the parts (no disk part).
        let image_len = 12 + fixed.len() + var.len();
        self.0.put_row_with(row_id, image_len, |out| {
            push_row_image(out, fixed, var, &[])
        });
    }
    fn delete_row(&mut self, row_id: u32) {
        self.0.delete_row(row_id);
    }
    fn delete_page(&mut self, page_no: u32) {
        self.0.delete_page(page_no);
    }
}

/// Where a fragment's scan puts its records: its own blocks until the data file
/// exists, then the file's writer.
enum ScanOut {
    BeforeFile(LcpBlocks),
    File(LcpFileWriter),
}

impl ScanOut {
    fn blocks(&mut self) -> &mut LcpBlocks {
        match self {
            ScanOut::BeforeFile(b) => b,
            ScanOut::File(w) => w.blocks(),
        }
    }
}

/// A fragment being restored: the checkpoint's records go to its own row ids.
struct FragmentRestore<'a>(&'a mut Fragment);

impl RestoreTarget for FragmentRestore<'_> {
    fn put_row(&mut self, row_id: u32, payload: &[u8]) -> Result<()> {
        self.0.restore_put(row_id, payload)
    }
    fn delete_row(&mut self, row_id: u32) -> Result<()> {
        self.0.restore_delete(row_id);
        Ok(())
    }
    fn delete_page(&mut self, page_no: u32) -> Result<()> {
        self.0.restore_delete_page(page_no);
        Ok(())
    }
}

/// A fingerprint of a table's stored row format (the LCP files' schema version).
fn schema_version(t: &TableRuntime) -> u64 {
    let l = &t.def.layout;
    (u64::from(t.def.id) << 40) ^ (u64::from(l.fixed_size) << 20) ^ t.def.columns.len() as u64
}

/// A fragment replica of the round that changed since its previous LCP (or has none).
struct Job {
    /// Index of its node in the round's [`NodeRound`]s.
    node: usize,
    table: Arc<TableRuntime>,
    cell: Arc<FragmentCell>,
    ctl: FragControl,
    /// ALL parts chosen for this LCP (the first LCP of a fragment is full regardless).
    all_parts_count: u32,
    /// Its scan began (its change map and counts were taken).
    began: AtomicBool,
    /// The replica's discard count when the round planned it (`Fragment::discards`).
    discards_at_plan: u64,
}

/// A node's share of the round.
/// A fragment replica an LCP visits: its table, partition and cell.
pub(super) type LcpFragment = (Arc<TableRuntime>, u32, Arc<FragmentCell>);

struct NodeRound {
    node: Arc<DataNode>,
    fs_dir: PathBuf,
    /// The redo position recorded as keep when the round completes.
    keep: Vec<u64>,
    /// The node's disk data at the round's start: its `LcpStart` record's LSN (the
    /// undo keep recorded when the round completes) and the pages then dirty.
    disk_start: crate::disk::node::LcpDiskStart,
    /// Held for a fragment's whole scan: one scan at a time per node (NDB's LDM thread
    /// scans one fragment at a time), paced per node.
    scan: Mutex<NodePacing>,
    /// LCP directories of the node's idle fragment replicas (step 6 moves their
    /// spares on).
    idle_dirs: Vec<(PathBuf, Arc<AtomicBool>)>,
    /// Row-id positions held on the node's disk-data fragment replicas from before the
    /// `LcpStart` record until the round ends: OPTIMIZE moves none of their rows
    /// meanwhile (a row moved after the disk pages' checkpoint point but before its
    /// fragment's scan would be restored at its new row id while its record, rolled
    /// back to that point, names the old one).
    _disk_holds: Vec<ScanCursor>,
}

struct NodePacing {
    pacer: DiskWritePacer,
    from: Instant,
    bytes: u64,
}

/// A fragment scanned into its data file, finished (footer, fdatasync).
struct Scanned {
    file: DataFileRef,
    bytes: u64,
    rows: u64,
    deletes: u64,
    pages_skipped: u64,
    max_gci: u32,
    create_us: u64,
    scan_turn_us: u64,
    /// Its data file was a spare made ahead (step 6 of the previous round).
    spare: bool,
    /// The replica was discarded (its node stopped) while it was scanned: the file is
    /// not stored in its chain (see step 4).
    discarded: bool,
}

/// The fragments of a round still scanning: the global checkpoint of step 3 waits for
/// none to be left. Each fragment holds a [`ScanDone`] guard that counts it down when
/// dropped, on every path (a scan that fails counts too, so the wait always ends).
struct ScansLeft {
    left: Mutex<usize>,
    zero: parking_lot::Condvar,
}

impl ScansLeft {
    fn new(n: usize) -> ScansLeft {
        ScansLeft {
            left: Mutex::new(n),
            zero: parking_lot::Condvar::new(),
        }
    }

    fn wait(&self) {
        let mut left = self.left.lock();
        while *left > 0 {
            self.zero.wait(&mut left);
        }
    }

    /// No scan is left to wait for (the pool returned, or is unwinding): a fragment
    /// whose work never ran must not keep the global checkpoint's thread waiting.
    fn release_all(&self) {
        *self.left.lock() = 0;
        self.zero.notify_all();
    }
}

/// Calls [`ScansLeft::release_all`] when dropped, also while unwinding.
struct ReleaseScans<'a>(&'a ScansLeft);

impl Drop for ReleaseScans<'_> {
    fn drop(&mut self) {
        self.0.release_all();
    }
}

struct ScanDone<'a>(Option<&'a ScansLeft>);

impl ScanDone<'_> {
    fn done(&mut self) {
        if let Some(s) = self.0.take() {
            let mut left = s.left.lock();
            // Saturating: `release_all` may have run first (the pool unwinding).
            *left = left.saturating_sub(1);
            if *left == 0 {
                s.zero.notify_all();
            }
        }
    }
}

impl Drop for ScanDone<'_> {
    fn drop(&mut self) {
        self.done();
    }
}

/// A fragment replica's share of step 6: its LCP directory, whether this round wrote
/// a data file there (a new spare is made) or not (an unused spare moves on), and its
/// table's dropped flag (a dropped table gets none).
struct SpareWork {
    dir: PathBuf,
    wrote: bool,
    dropped: Arc<AtomicBool>,
}

/// Step 6's work for the round of `rounds` and `jobs`, taken before the rounds are
/// consumed.
fn spare_plan(rounds: &[NodeRound], jobs: &[Job]) -> Vec<SpareWork> {
    let idle = rounds.iter().flat_map(|r| {
        r.idle_dirs.iter().map(|(dir, dropped)| SpareWork {
            dir: dir.clone(),
            wrote: false,
            dropped: dropped.clone(),
        })
    });
    jobs.iter()
        .map(|j| SpareWork {
            dir: lcp_dir(&rounds[j.node].fs_dir, j.ctl.table_id, j.ctl.fragment_id),
            wrote: true,
            dropped: j.table.dropped.clone(),
        })
        .chain(idle)
        .collect()
}

/// The first error of a phase's results (in job order), or the values.
fn all_ok<R>(results: Vec<Result<R>>) -> Result<Vec<R>> {
    results.into_iter().collect()
}

/// The data file a fragment's create thread made, and how long it took.
fn join_create(
    h: std::thread::ScopedJoinHandle<'_, (Result<LcpFileWriter>, u64)>,
) -> (Result<LcpFileWriter>, u64) {
    h.join().unwrap_or_else(|_| {
        (
            Err(crate::error::codes::internal(
                "an LCP file create thread panicked",
            )),
            0,
        )
    })
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

impl ClusterInner {
    /// The logged tables' fragment replicas on `node`, by table id.
    /// Row-id positions on every disk-data fragment replica of `frags` (see
    /// `NodeRound::_disk_holds`): while they are held, OPTIMIZE moves none of their rows.
    pub(super) fn hold_disk_replicas(frags: &[LcpFragment]) -> Vec<ScanCursor> {
        let mut holds = Vec::new();
        for (_, _, cell) in frags {
            let hold = cell.open_cursor();
            // Taking the mutex once after opening waits for an OPTIMIZE step that began
            // before: from here on, none moves a row of this replica.
            if cell.state.lock().has_disk_part() {
                holds.push(hold);
            }
        }
        holds
    }

    pub(super) fn lcp_fragments(&self, node: &DataNode) -> Vec<LcpFragment> {
        let mut tables = self.dict.read().all();
        tables.sort_by_key(|t| t.def.id);
        let mut out = Vec::new();
        for t in tables.into_iter().filter(|t| t.def.logging) {
            for (p, reps) in t.fragments.iter().enumerate() {
                if let Some(c) = reps.iter().find(|c| c.node_id == node.node_id) {
                    out.push((t.clone(), p as u32, c.clone()));
                }
            }
        }
        out
    }

    /// `lcp_lock`, waited for in steps so that a waiter sees the cluster close: a
    /// round that fails stops the cluster while holding the lock, and the shutdown
    /// joins the LCP driver thread, which may be the one waiting here.
    pub(crate) fn lcp_turn(&self) -> Result<parking_lot::MutexGuard<'_, ()>> {
        loop {
            if let Some(g) = self.lcp_lock.try_lock_for(Duration::from_millis(20)) {
                return Ok(g);
            }
            self.check_open()?;
        }
    }

    /// Runs one local checkpoint on every data node that keeps files (see the module
    /// doc); returns what it wrote. A no-op (zero stats) on a cluster without files.
    pub fn run_lcp(&self) -> Result<LcpStats> {
        let _one = self.lcp_turn()?;
        self.check_open()?;
        self.remove_dropped_checkpoints()?;
        let mut jobs = Vec::new();
        let r = self.run_lcp_locked(&mut jobs);
        for node in &self.data_nodes {
            node.in_lcp_round.store(false, Ordering::SeqCst);
        }
        if let Ok(stats) = &r {
            self.lcp_completed_next
                .fetch_max(stats.lcp_id.saturating_add(1), Ordering::AcqRel);
            if stats.lcp_id >= self.lcp_own_restart_from.load(Ordering::Acquire) {
                self.lcp_own_restart_from.store(u32::MAX, Ordering::Release);
            }
        }
        if r.is_err() {
            // Their change maps and counts were taken by a scan whose file never
            // became part of a chain: their next LCP writes them in full.
            for job in jobs.iter().filter(|j| j.began.load(Ordering::Acquire)) {
                job.cell.state.lock().require_full_lcp();
            }
        }
        let stats = r?;
        self.complete_rejoins()?;
        Ok(stats)
    }

    /// Asks the LCP driver for a local checkpoint now, as part of this node's own
    /// restart (a node restart's copy wrote rows without redo: they are durable only
    /// once a checkpoint that starts after them completes), so paced at
    /// MaxDiskWriteSpeedOwnRestart as NDB paces it. Returns the ticket
    /// [`ClusterInner::lcp_completed_since`] takes: every round with an id at or above
    /// it starts after this call.
    pub(crate) fn request_lcp(&self) -> u32 {
        let ticket = self.lcp_next_id.load(Ordering::Acquire);
        self.lcp_own_restart_from.store(ticket, Ordering::Release);
        self.lcp_requested.store(true, Ordering::Release);
        self.lcp_wakeup.notify();
        ticket
    }

    /// Whether a local checkpoint round numbered `ticket` or later has completed.
    pub(crate) fn lcp_completed_since(&self, ticket: u32) -> bool {
        self.lcp_completed_next.load(Ordering::Acquire) > ticket
    }

    /// Step 1 and the choice of step 2: every node's keep position, and the fragments
    /// with something to write (the others counted idle).
    fn lcp_plan(&self, lcp_id: u32, stats: &mut LcpStats) -> Result<(Vec<NodeRound>, Vec<Job>)> {
        let cfg = self.partial_lcp_config();
        let (min_speed, max_speed) = self.disk_write_speeds();
        let mut rounds = Vec::new();
        let mut jobs = Vec::new();
        for node in &self.data_nodes {
            let Some(log) = &node.log else { continue };
            // Marked before the state is read (both SeqCst, as the restart's state
            // change and its read of the mark): a restart from the node's own files
            // sees the mark of any round that saw the node started.
            node.in_lcp_round.store(true, Ordering::SeqCst);
            if node.run_state_seq_cst() != super::node_restart::NodeRunState::Started {
                // Stopped, or its replicas are being copied (not yet in any chain):
                // the first round that starts once it has started writes its
                // replicas in full.
                node.in_lcp_round.store(false, Ordering::SeqCst);
                continue;
            }
            let keep = log.redo.head();
            // After the keep: every change its undo record follows has its redo after
            // the keep too (a commit logs undo before redo), so a restart that rolls
            // the disk pages back to this record replays it (docs/durability.md §7).
            let frags = self.lcp_fragments(node);
            let disk_holds = Self::hold_disk_replicas(&frags);
            let disk_start = node.disk.lcp_start(lcp_id)?;
            self.mgm.log.event(
                Severity::Info,
                node.node_id,
                &format!(
                    "Local checkpoint {lcp_id} started. Keep GCI = {} oldest restorable GCI = {}",
                    self.gcp.durable_hi(),
                    self.restored_gci()
                ),
            );
            let mut pacer = DiskWritePacer::new(min_speed, max_speed);
            pacer.set_redo_fill_percent(log.redo_fill_percent());
            let mut idle_dirs = Vec::new();
            // NDB's `Backup::get_total_memory`: the DataMemory the node has in use,
            // divided by its LDM instances (the memory of "this LDM"), against which
            // rule 1 of `all_parts` weighs a fragment's own memory.
            let ldm_memory_used_bytes = node.pool.used_pages() * crate::storage::PAGE_SIZE as u64
                / u64::from(self.ldm_per_node.max(1));
            for (table, part, cell) in frags {
                let dir = lcp_dir(log.fs_dir(), table.def.id, part);
                let ctl = FragControl::load(&*self.fs, &dir)?
                    .unwrap_or_else(|| FragControl::new(table.def.id, part));
                let discards_at_plan;
                let change = {
                    let f = cell.state.lock();
                    discards_at_plan = f.discards();
                    let full = ctl.files.is_empty() || f.lcp_needs_full();
                    if !full && !f.changed_since_lcp() {
                        None
                    } else {
                        let c = f.lcp_change_counts();
                        let m = f.memory();
                        Some(ChangeStats {
                            row_count: f.rows(),
                            rows_inserted: c.inserted,
                            rows_updated: c.updated,
                            rows_deleted: c.deleted,
                            memory_used_bytes: u64::from(m.fixed_pages + m.var_pages)
                                * crate::storage::PAGE_SIZE as u64,
                            ldm_memory_used_bytes,
                            page_count: m.fixed_pages,
                            first_lcp: full,
                        })
                    }
                };
                let Some(change) = change else {
                    stats.fragments_idle += 1;
                    idle_dirs.push((dir, table.dropped.clone()));
                    continue;
                };
                jobs.push(Job {
                    node: rounds.len(),
                    table,
                    cell,
                    ctl,
                    all_parts_count: choose_all_parts(&change, &cfg),
                    began: AtomicBool::new(false),
                    discards_at_plan,
                });
            }
            rounds.push(NodeRound {
                node: node.clone(),
                fs_dir: log.fs_dir().to_path_buf(),
                keep,
                disk_start,
                scan: Mutex::new(NodePacing {
                    pacer,
                    from: Instant::now(),
                    bytes: 0,
                }),
                idle_dirs,
                _disk_holds: disk_holds,
            });
        }
        Ok((rounds, jobs))
    }

    /// Step 5: each node's keep is saved with the next global checkpoint; the redo
    /// before it is released once that system file is on disk.
    fn lcp_complete_nodes(&self, rounds: Vec<NodeRound>, lcp_id: u32, discarded: &[bool]) {
        for (i, round) in rounds.into_iter().enumerate() {
            let Some(log) = &round.node.log else { continue };
            if discarded.get(i).copied().unwrap_or(false) {
                // The node stopped under the round, which stored nothing of the
                // replicas it discarded: their chains do not reach this keep, so the
                // node's keep stays where its chains still hold (its restart from its
                // own files replays from there).
                continue;
            }
            if lcp_id >= round.node.rejoin_from_lcp.load(Ordering::Acquire) {
                // The round after its node restart's copy: the node's files restore it
                // once its system file holds this keep (`restorable_nodes`).
                round
                    .node
                    .rejoin_from_lcp
                    .store(u32::MAX, Ordering::Release);
                *round.node.rejoin_keep.lock() = Some(round.keep.clone());
            }
            log.set_keep(round.keep);
            log.set_undo_keep(round.disk_start.undo_lsn.unwrap_or(0));
            self.mgm.log.event(
                Severity::Info,
                round.node.node_id,
                &format!("Local checkpoint {lcp_id} completed"),
            );
        }
    }

    /// Before any control file names the round: on each node that holds disk data,
    /// the `LcpStart` record and every disk page and extent header changed before it
    /// are on disk (docs/durability.md §7).
    fn lcp_flush_disks(&self, rounds: &[NodeRound]) -> Result<()> {
        all_ok(run_parallel(
            rounds
                .iter()
                .filter(|r| r.node.disk.has_disk_data())
                .collect(),
            LCP_IO_THREADS,
            |_, r: &NodeRound| r.node.disk.lcp_flush(&r.disk_start),
        ))
        .map(|_| ())
    }

    /// Step 2 for one fragment: scanned (holding its node's scan turn) in batches of
    /// pages, its mutex held per batch only, into its data file, which a thread of its
    /// own creates meanwhile (the scan's output waits in memory until it exists).
    fn lcp_scan_fragment(
        &self,
        round: &NodeRound,
        job: &Job,
        lcp_id: u32,
        scans_left: &ScansLeft,
    ) -> Result<Scanned> {
        let mut scan_done = ScanDone(Some(scans_left));
        let all = lcp_all_range(&job.ctl, job.all_parts_count);
        let all_part = move |page: u32| all.contains(part_of_page(page));
        std::thread::scope(|scope| {
            // The file (a file and a directory sync) is created while the scan runs;
            // what the scan finds meanwhile waits in memory, up to
            // LCP_BUFFER_BEFORE_FILE_BYTES.
            let dir = lcp_dir(&round.fs_dir, job.ctl.table_id, job.ctl.fragment_id);
            let spare = self.fs.exists(&data_file_path(&dir, lcp_id));
            let open = || {
                let created = Instant::now();
                let w = begin_lcp(
                    &*self.fs,
                    &round.fs_dir,
                    &job.ctl,
                    lcp_id,
                    job.all_parts_count,
                    0,
                    schema_version(&job.table),
                );
                (w, micros(created))
            };
            // A spare is opened here (no sync: tens of microseconds), so that the scan
            // writes its blocks as it goes and their write-back starts at once; a new
            // file (a file and a directory sync) is created by a thread of its own.
            let (mut out, mut create, mut create_us) = if spare {
                let (w, us) = open();
                (ScanOut::File(w?), None, us)
            } else {
                (
                    ScanOut::BeforeFile(LcpBlocks::new(lcp_id)),
                    Some(scope.spawn(open)),
                    0,
                )
            };
            let mut pacing = round.scan.lock();
            let turn = Instant::now();
            job.began.store(true, Ordering::Release);
            let start_gci = crate::log::gcp::gci_hi(self.gcp.current());
            // The scan's position is a page number: OPTIMIZE moves no row meanwhile.
            let position = job.cell.open_cursor();
            let mut scan = job.cell.state.lock().lcp_begin(all.is_full(), start_gci);
            loop {
                let done = {
                    let blocks = out.blocks();
                    let before = blocks.encoded_bytes();
                    let mut f = job.cell.state.lock();
                    let done = f.lcp_scan_batch(
                        &mut scan,
                        LCP_BATCH_PAGES,
                        &all_part,
                        &mut BlockSink(blocks),
                    );
                    pacing.bytes += blocks.encoded_bytes() - before;
                    done
                };
                if done {
                    break;
                }
                if let ScanOut::BeforeFile(blocks) = &mut out
                    && let Some(h) = create.take_if(|h| {
                        h.is_finished() || blocks.pending_bytes() >= LCP_BUFFER_BEFORE_FILE_BYTES
                    })
                {
                    let (w, us) = join_create(h);
                    create_us = us;
                    let mut w = w?;
                    w.adopt(std::mem::replace(blocks, LcpBlocks::new(lcp_id)))?;
                    out = ScanOut::File(w);
                }
                if let ScanOut::File(w) = &mut out {
                    w.write_sealed()?;
                }
                // The round the node's own restart asked for, and one already running
                // then (the asked one waits for it), write at the restart's speed;
                // while commits wait for redo file space that only this round can
                // release, it writes unpaced (NDB would let them fail with 410 once
                // RedoOverCommitLimit passes at MaxDiskWriteSpeed).
                let wait = if self.commits_wait_for_redo_files() {
                    Duration::ZERO
                } else {
                    match self.own_restart_speed() {
                        Some(own) => DiskWritePacer::new(own, own)
                            .delay_for(pacing.bytes, pacing.from.elapsed()),
                        None => pacing.pacer.delay_for(pacing.bytes, pacing.from.elapsed()),
                    }
                };
                if !wait.is_zero() {
                    std::thread::sleep(wait.min(Duration::from_millis(100)));
                }
            }
            // The node's next fragment may scan while this one waits for its file and
            // its sync; the global checkpoint may start once every scan is here.
            let discarded = job.cell.state.lock().discards() != job.discards_at_plan;
            drop(position);
            drop(pacing);
            scan_done.done();
            let scan_turn_us = micros(turn);
            let mut writer = match (out, create) {
                (ScanOut::File(w), _) => w,
                (ScanOut::BeforeFile(blocks), Some(h)) => {
                    let (w, us) = join_create(h);
                    create_us = us;
                    let mut w = w?;
                    w.adopt(blocks)?;
                    w
                }
                (ScanOut::BeforeFile(_), None) => {
                    return Err(crate::error::codes::internal(
                        "LCP scan ended without its file",
                    ));
                }
            };
            writer.set_max_gci(scan.max_gci);
            let header = *writer.header();
            let summary = writer.finish()?;
            Ok(Scanned {
                file: DataFileRef::new(&header, &summary),
                bytes: summary.bytes,
                rows: scan.rows_written,
                deletes: scan.deletes_written,
                pages_skipped: scan.pages_skipped,
                max_gci: scan.max_gci,
                create_us,
                scan_turn_us,
                spare,
                discarded,
            })
        })
    }

    fn run_lcp_locked(&self, jobs_out: &mut Vec<Job>) -> Result<LcpStats> {
        let t0 = Instant::now();
        let lcp_id = self.lcp_next_id.fetch_add(1, Ordering::AcqRel);
        let mut stats = LcpStats {
            lcp_id,
            ..LcpStats::default()
        };
        let (rounds, jobs) = self.lcp_plan(lcp_id, &mut stats)?;
        if rounds.is_empty() {
            return Ok(stats);
        }
        jobs_out.extend(jobs);
        let jobs: &[Job] = jobs_out;
        let spares = spare_plan(&rounds, jobs);
        if jobs.is_empty() {
            // Nothing written: only the keep positions move (step 5).
            self.lcp_flush_disks(&rounds)?;
            self.lcp_complete_nodes(rounds, lcp_id, &[]);
            stats.set_elapsed(t0.elapsed());
            self.lcp_make_spares(spares, lcp_id, &mut stats);
            *self.last_lcp.lock() = Some(stats.clone());
            return Ok(stats);
        }
        // Steps 2 and 3, every fragment at once: each node scans one at a time, the
        // files are created (each a file and a directory sync) while the scans run,
        // each is finished and synced as soon as its scan ends, and the global
        // checkpoint starts when the last scan ends. Everything the files hold must be
        // restorable through the redo log too: the rows they hold carry their GCIs,
        // but a deleted row is a delete marker or, in an ALL part, just absent, and
        // neither names its GCI; so the GCI current at the end of the scans is closed
        // (every change a scan saw has a GCI at most that). Skipping it when there are
        // no delete markers and `max_gci` is durable lost a row deleted in an open GCI
        // from an ALL part (simulated crash, seed 399). What is skipped is the case
        // where no change at all (commit, sweep, move) since the last durable
        // checkpoint exists: then everything the scans saw is restorable already.
        let phase = Instant::now();
        let scans_left = ScansLeft::new(jobs.len());
        let (scanned, gcp, scans_end) = std::thread::scope(|scope| {
            let gcp = scope.spawn(|| {
                scans_left.wait();
                let scans_end = Instant::now();
                if self.gcp.changes_durable() {
                    return (Ok(None), scans_end);
                }
                (self.force_gcp().map(|_| Some(micros(scans_end))), scans_end)
            });
            let release = ReleaseScans(&scans_left);
            let scanned = run_parallel(jobs.iter().collect(), LCP_IO_THREADS, |_, job: &Job| {
                self.lcp_scan_fragment(&rounds[job.node], job, lcp_id, &scans_left)
            });
            drop(release);
            let (gcp, scans_end) = gcp.join().unwrap_or_else(|_| {
                (
                    Err(crate::error::codes::internal(
                        "the LCP's global checkpoint thread panicked",
                    )),
                    Instant::now(),
                )
            });
            (scanned, gcp, scans_end)
        });
        stats.scan_us = scans_end.duration_since(phase).as_micros() as u64;
        stats.sync_us = micros(scans_end);
        let gcp_us = gcp?;
        stats.gcp_forced = gcp_us.is_some();
        stats.gcp_us = gcp_us.unwrap_or(0);
        let scanned = all_ok(scanned)?;
        for s in &scanned {
            stats.fragments += 1;
            stats.rows += s.rows;
            stats.deletes += s.deletes;
            stats.pages_skipped += s.pages_skipped;
            stats.create_us += s.create_us;
            stats.scan_turn_us += s.scan_turn_us;
            stats.spares_used += u64::from(s.spare);
            stats.bytes += s.bytes;
        }
        // Step 4: the disk-data pages as of each node's LcpStart record on disk; then
        // the control files, all at once; then the files they dropped.
        let phase = Instant::now();
        self.lcp_flush_disks(&rounds)?;
        // A replica discarded while it was scanned keeps its previous chain: its node
        // stopped, and a node restart from its own files restores that chain (the
        // file, half from rows and half from nothing, is removed). The replica is
        // marked for a full LCP by its discard in any case.
        let mut discarded_nodes = vec![false; rounds.len()];
        for (job, s) in jobs.iter().zip(&scanned) {
            discarded_nodes[job.node] |= s.discarded;
        }
        let stores: Vec<(&Job, DataFileRef, u32, bool)> = jobs
            .iter()
            .zip(scanned)
            .map(|(job, s)| (job, s.file, s.max_gci, s.discarded))
            .collect();
        all_ok(run_parallel(
            stores,
            LCP_IO_THREADS,
            |_, (job, file, max_gci, discarded)| {
                let dir = lcp_dir(
                    &rounds[job.node].fs_dir,
                    job.ctl.table_id,
                    job.ctl.fragment_id,
                );
                if discarded {
                    let path = data_file_path(&dir, file.lcp_id);
                    return match self.fs.remove(&path) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            Err(crate::error::codes::file_system_error(format!(
                                "remove LCP file {}: {e}",
                                path.display()
                            )))
                        }
                        _ => Ok(()),
                    };
                }
                let (next, dropped) = job.ctl.after_lcp(file, max_gci)?;
                next.store(&*self.fs, &dir)?;
                FragControl::remove_dropped(&*self.fs, &dir, &dropped)
            },
        ))?;
        stats.control_us = micros(phase);
        self.lcp_complete_nodes(rounds, lcp_id, &discarded_nodes);
        stats.set_elapsed(t0.elapsed());
        self.lcp_make_spares(spares, lcp_id, &mut stats);
        *self.last_lcp.lock() = Some(stats.clone());
        Ok(stats)
    }

    /// Step 6, once round `lcp_id` is complete: the next round's spare data files
    /// (see the module doc). Best effort: a spare that cannot be made is left to the
    /// next round, which then creates its file itself (and meets the same error, if
    /// the disk is failing, where it stops the cluster). Never replaces a file.
    fn lcp_make_spares(&self, spares: Vec<SpareWork>, lcp_id: u32, stats: &mut LcpStats) {
        if spares.is_empty() || self.is_closed() {
            return;
        }
        let t = Instant::now();
        let next = self.lcp_next_id.load(Ordering::Acquire);
        let fs = &*self.fs;
        let _ = run_parallel(spares, LCP_IO_THREADS, |_, w: SpareWork| {
            let to = data_file_path(&w.dir, next);
            if w.dropped.load(Ordering::Acquire) {
                // Its files go at the next round's start (`remove_dropped_checkpoints`).
            } else if w.wrote {
                create_spare(fs, &to)?;
            } else {
                let from = data_file_path(&w.dir, lcp_id);
                if fs.exists(&from) && !fs.exists(&to) {
                    fs.rename(&from, &to).map_err(|e| {
                        crate::error::codes::file_system_error(format!(
                            "rename LCP spare {}: {e}",
                            from.display()
                        ))
                    })?;
                }
            }
            Ok(())
        });
        stats.spare_us = micros(t);
    }

    /// Restores every fragment replica of `node` from its checkpoint chain (system
    /// restart, before the redo is replayed), on one thread per core (at most
    /// [`MAX_RESTORE_THREADS`], each restoring one replica at a time, as NDB's LDM
    /// threads restore their fragments at once), while a helper thread commits the
    /// DataMemory the restore is about to use ([`populate_ahead`]).
    pub(crate) fn restore_node_fragments(&self, node: &DataNode) -> Result<NodeRestore> {
        let Some(log) = &node.log else {
            return Ok(NodeRestore::default());
        };
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            // DataMemory committed ahead of the restore: the restore then writes into
            // pages the kernel has already zeroed.
            let helper = scope.spawn(|| populate_ahead(&node.pool, &done));
            let frags = self.lcp_fragments(node);
            let results = run_parallel(frags, restore_threads(), |_, (table, part, cell)| {
                let cpu0 = thread_cpu_secs();
                let mut f = cell.state.lock();
                let r = self.restore_replica(log.fs_dir(), &table, part, &mut f);
                r.map(|(lcp_id, rows)| (lcp_id, rows, thread_cpu_secs() - cpu0))
            });
            done.store(true, Ordering::Release);
            let (populated_pages, populate_cpu_secs) = helper.join().unwrap_or((0, 0.0));
            let mut out = NodeRestore {
                populated_pages,
                populate_cpu_secs,
                ..NodeRestore::default()
            };
            for r in results {
                let (lcp_id, rows, cpu_secs) = r?;
                if lcp_id > 0 {
                    out.fragments += 1;
                }
                out.rows += rows;
                out.max_lcp_id = out.max_lcp_id.max(lcp_id);
                out.restore_cpu_secs += cpu_secs;
            }
            Ok(out)
        })
    }

    /// Restores one fragment replica (`f`, empty, its mutex held) from its checkpoint
    /// chain under `node_fs_dir`: orphan files removed, rows put back at their row ids,
    /// ordered indexes rebuilt. Returns the chain's LCP id and the rows put ((0, 0): no
    /// checkpoint of it yet).
    pub(crate) fn restore_replica(
        &self,
        node_fs_dir: &std::path::Path,
        table: &TableRuntime,
        part: u32,
        f: &mut Fragment,
    ) -> Result<(u32, u64)> {
        let dir = lcp_dir(node_fs_dir, table.def.id, part);
        let ctl = FragControl::load(&*self.fs, &dir)?;
        remove_orphans(&*self.fs, &dir, ctl.as_ref())?;
        let mut restored = (0, 0);
        if let Some(ctl) = ctl {
            let r = restore_fragment(&*self.fs, node_fs_dir, &ctl, &mut FragmentRestore(f))?;
            restored = (ctl.lcp_id, r.rows);
        }
        f.restore_finish()?;
        Ok(restored)
    }

    /// Tables dropped (or truncated: their old ids): their checkpoint files go at the
    /// start of the next LCP round, under the round's lock, so that a round that still
    /// holds them finishes first.
    pub(crate) fn forget_checkpoints_of(&self, table_ids: &[u32]) {
        self.dropped_lcp_tables.lock().extend_from_slice(table_ids);
    }

    /// Removes the checkpoint files of the tables queued by
    /// [`ClusterInner::forget_checkpoints_of`]. Call with `lcp_lock` held.
    fn remove_dropped_checkpoints(&self) -> Result<()> {
        let ids = std::mem::take(&mut *self.dropped_lcp_tables.lock());
        for id in ids {
            self.remove_checkpoint_files(id)?;
        }
        Ok(())
    }

    /// Removes every checkpoint file of table `table_id` on every node (fragment
    /// directories are numbered from 0 without gaps).
    pub(crate) fn remove_checkpoint_files(&self, table_id: u32) -> Result<()> {
        for node in &self.data_nodes {
            let Some(log) = &node.log else { continue };
            for fragment in 0.. {
                let dir = lcp_dir(log.fs_dir(), table_id, fragment);
                let files = match self.fs.list_dir(&dir) {
                    Ok(f) => f,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(e) => {
                        return Err(crate::error::codes::file_system_error(format!(
                            "{}: {e}",
                            dir.display()
                        )));
                    }
                };
                for f in files {
                    self.fs.remove(&f).map_err(|e| {
                        crate::error::codes::file_system_error(format!("{}: {e}", f.display()))
                    })?;
                }
            }
        }
        Ok(())
    }

    /// System restart: checkpoint files of tables the dictionary no longer has (dropped
    /// before a crash let the next LCP remove them).
    pub(crate) fn remove_orphan_checkpoints(&self) -> Result<()> {
        let (next_id, live): (u32, std::collections::BTreeSet<u32>) = {
            let dict = self.dict.read();
            (
                dict.next_table_id(),
                dict.all().iter().map(|t| t.def.id).collect(),
            )
        };
        for id in (1..=next_id).filter(|id| !live.contains(id)) {
            self.remove_checkpoint_files(id)?;
        }
        Ok(())
    }

    fn partial_lcp_config(&self) -> PartialLcpConfig {
        let config = self.config.read();
        let Some(dn) = config.data_nodes.first() else {
            return PartialLcpConfig::default();
        };
        let d = PartialLcpConfig::default();
        PartialLcpConfig {
            enable_partial_lcp: dn
                .get_bool("EnablePartialLcp")
                .unwrap_or(d.enable_partial_lcp),
            recovery_work_pct: dn
                .get_u64("RecoveryWork")
                .map_or(d.recovery_work_pct, |v| v as u32),
            insert_recovery_work_pct: dn
                .get_u64("InsertRecoveryWork")
                .map_or(d.insert_recovery_work_pct, |v| v as u32),
        }
    }

    /// Whether a commit on some node waits for redo file space (see the pacing of
    /// [`Self::run_lcp`]'s scans).
    fn commits_wait_for_redo_files(&self) -> bool {
        self.data_nodes
            .iter()
            .filter_map(|n| n.log.as_ref())
            .any(|l| l.redo.commits_wait_for_files())
    }

    /// MaxDiskWriteSpeedOwnRestart while a round the node's own restart asked for
    /// ([`ClusterInner::request_lcp`]) has not completed; None otherwise.
    pub(crate) fn own_restart_speed(&self) -> Option<u64> {
        if self.lcp_own_restart_from.load(Ordering::Acquire) == u32::MAX {
            return None;
        }
        let config = self.config.read();
        let dn = config.data_nodes.first();
        Some(
            dn.and_then(|d| d.get_u64("MaxDiskWriteSpeedOwnRestart"))
                .unwrap_or(200 << 20),
        )
    }

    /// (min, max) write speed of a round: MinDiskWriteSpeed..MaxDiskWriteSpeed.
    fn disk_write_speeds(&self) -> (u64, u64) {
        let config = self.config.read();
        let dn = config.data_nodes.first();
        let get = |name: &str, default: u64| dn.and_then(|d| d.get_u64(name)).unwrap_or(default);
        (
            get("MinDiskWriteSpeed", 10 << 20),
            get("MaxDiskWriteSpeed", 20 << 20),
        )
    }

    /// The GCI the last system restart recovered to (0 after a fresh start).
    pub fn restored_gci(&self) -> u32 {
        self.restart.lock().as_ref().map_or(0, |s| s.restored_gci)
    }

    /// Redo bytes (all nodes) after which a local checkpoint starts
    /// (TimeBetweenLocalCheckpoints: 4 × 2^n bytes).
    pub(crate) fn lcp_trigger_bytes(&self) -> u64 {
        let config = self.config.read();
        let n = config
            .data_nodes
            .first()
            .and_then(|d| d.get_u64("TimeBetweenLocalCheckpoints"))
            .unwrap_or(20)
            .min(31);
        4u64 << n
    }
}
