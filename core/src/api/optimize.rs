//! OPTIMIZE TABLE over a whole table: every live fragment replica of the table and of
//! its hidden tables (BLOB parts, unique indexes) is compacted by
//! [`Fragment::optimize_step`](crate::txn::fragment::Fragment::optimize_step), online.
//!
//! Pacing: the replicas are stepped round-robin, one bounded step each (the fragment's
//! mutex held for that step only), then the driver sleeps `delay` — MySQL's
//! `ndb_optimization_delay`, 10 ms by default — so reads and writes of the table go on
//! between steps with at most one step's wait. A replica whose rows must move while a
//! scan, LCP scan or node-restart copy holds a position in it is retried at each round
//! for up to `busy_timeout_ms`; then its fixed parts are left (its var parts are still
//! compacted) and the report counts it.
//!
//! One OPTIMIZE per replica at a time: a second OPTIMIZE of the same table waits for the
//! first (error 4010-style conflicts are not possible: the claim is taken per replica).
//! Dropping the table during OPTIMIZE ends it; a cluster shutdown ends it with the
//! shutdown's error. Every exit path ends the evacuations it began.

use super::dict::TableRuntime;
use super::ndb::Ndb;
use crate::error::{Result, codes};
use crate::log::gcp::gci_hi;
use crate::txn::fragment::{
    FragmentCell, OptimizeClaim, OptimizeCursor, OptimizeStats, OptimizeStep,
};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// MySQL's default `ndb_optimization_delay` (ms between batches).
pub const DEFAULT_OPTIMIZATION_DELAY_MS: u64 = 10;
/// How long a replica with open scans is waited for before its rows are left in place.
pub const DEFAULT_BUSY_TIMEOUT_MS: u64 = 10_000;
/// Longest wait for another OPTIMIZE of the same replica to finish.
const CLAIM_TIMEOUT: Duration = Duration::from_secs(600);

/// How OPTIMIZE paces itself.
#[derive(Debug, Clone, Copy)]
pub struct OptimizeOptions {
    pub delay_ms: u64,
    pub busy_timeout_ms: u64,
}

impl Default for OptimizeOptions {
    fn default() -> Self {
        OptimizeOptions {
            delay_ms: DEFAULT_OPTIMIZATION_DELAY_MS,
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
        }
    }
}

/// What an OPTIMIZE TABLE did, summed over the replicas it compacted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OptimizeReport {
    pub replicas: u32,
    pub stats: OptimizeStats,
    /// Replicas whose fixed parts stayed because scans (or, for disk-data tables, a local
    /// checkpoint) kept positions open.
    pub replicas_busy: u32,
    pub elapsed_ms: u64,
}

impl OptimizeReport {
    /// DataMemory pages given back.
    pub fn pages_freed(&self) -> u64 {
        let s = &self.stats;
        let before = u64::from(s.fixed_pages_before)
            + u64::from(s.var_pages_before)
            + u64::from(s.ordered_pages_before);
        let after = u64::from(s.fixed_pages_after)
            + u64::from(s.var_pages_after)
            + u64::from(s.ordered_pages_after);
        before.saturating_sub(after) + s.hash_pages_freed
    }
}

fn add(into: &mut OptimizeStats, s: &OptimizeStats) {
    into.rows_moved += s.rows_moved;
    into.var_parts_moved += s.var_parts_moved;
    into.rows_locked += s.rows_locked;
    into.fixed_pages_before += s.fixed_pages_before;
    into.fixed_pages_after += s.fixed_pages_after;
    into.var_pages_before += s.var_pages_before;
    into.var_pages_after += s.var_pages_after;
    into.ordered_pages_before += s.ordered_pages_before;
    into.ordered_pages_after += s.ordered_pages_after;
    into.index_leaves_freed += s.index_leaves_freed;
    into.hash_pages_freed += s.hash_pages_freed;
    into.disk_records_moved += s.disk_records_moved;
    into.extents_before += s.extents_before;
    into.extents_after += s.extents_after;
}

/// One replica being compacted.
struct Job {
    table: Arc<TableRuntime>,
    cell: Arc<FragmentCell>,
    cursor: OptimizeCursor,
    _claim: OptimizeClaim,
    busy_since: Option<Instant>,
    busy_gave_up: bool,
}

impl Job {
    /// Ends an unfinished cursor (its evacuated pages take rows again).
    fn abandon(&mut self) {
        if !self.cursor.is_done() {
            self.cell.state.lock().optimize_abandon(&mut self.cursor);
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        self.abandon();
    }
}

/// The table and its hidden tables, parents first.
fn with_hidden(t: &Arc<TableRuntime>, out: &mut Vec<Arc<TableRuntime>>) {
    out.push(t.clone());
    for h in t.blob_tables.iter().chain(&t.unique_tables).flatten() {
        with_hidden(h, out);
    }
}

fn claim(cell: &Arc<FragmentCell>) -> Result<OptimizeClaim> {
    let began = Instant::now();
    loop {
        if let Some(c) = cell.claim_optimize() {
            return Ok(c);
        }
        if began.elapsed() > CLAIM_TIMEOUT {
            return Err(codes::deadlock_timeout()
                .detail("another OPTIMIZE TABLE of this table has been running for 10 minutes"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Ndb {
    /// OPTIMIZE TABLE `name` (module docs).
    pub fn optimize_table(
        &self,
        table: &Arc<TableRuntime>,
        opts: OptimizeOptions,
    ) -> Result<OptimizeReport> {
        let began = Instant::now();
        table.check_live()?;
        let mut tables = Vec::new();
        with_hidden(table, &mut tables);
        let mut jobs = Vec::new();
        for t in &tables {
            for replicas in &t.fragments {
                for cell in replicas {
                    if cell.is_live() {
                        jobs.push(Job {
                            table: t.clone(),
                            cell: cell.clone(),
                            cursor: OptimizeCursor::default(),
                            _claim: claim(cell)?,
                            busy_since: None,
                            busy_gave_up: false,
                        });
                    }
                }
            }
        }
        let cluster = self.cluster().clone();
        let delay = Duration::from_millis(opts.delay_ms);
        let busy_timeout = Duration::from_millis(opts.busy_timeout_ms);
        let mut report = OptimizeReport {
            replicas: jobs.len() as u32,
            ..OptimizeReport::default()
        };
        while jobs.iter().any(|j| !j.cursor.is_done()) {
            cluster.check_open()?;
            for j in jobs.iter_mut().filter(|j| !j.cursor.is_done()) {
                if j.table.dropped.load(Ordering::Acquire) || !j.cell.is_live() {
                    j.abandon();
                    continue;
                }
                let gci = gci_hi(cluster.current_gci());
                cluster.gcp.note_change(gci);
                let step = {
                    let mut f = j.cell.state.lock();
                    let may_move = !j.busy_gave_up && j.cell.no_open_cursors();
                    f.optimize_step(&mut j.cursor, may_move, gci)?
                };
                match step {
                    OptimizeStep::Busy => {
                        let since = *j.busy_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= busy_timeout {
                            // Rows stay; the var parts are still compacted (they move
                            // whatever is open).
                            j.busy_gave_up = true;
                            j.cell.state.lock().optimize_skip_rows(&mut j.cursor);
                        }
                    }
                    OptimizeStep::More | OptimizeStep::Done => j.busy_since = None,
                }
            }
            if jobs.iter().any(|j| !j.cursor.is_done()) {
                std::thread::sleep(delay.max(Duration::from_micros(100)));
            }
        }
        for j in &jobs {
            add(&mut report.stats, &j.cursor.stats);
            report.replicas_busy += u32::from(j.busy_gave_up);
        }
        report.elapsed_ms = began.elapsed().as_millis() as u64;
        Ok(report)
    }
}
