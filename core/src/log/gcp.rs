//! Global checkpoints and epochs (DBDIH's GCP protocol, in one process).
//!
//! Every commit is stamped with the current 64-bit GCI: `gci_hi << 32 | gci_lo`, where
//! `gci_hi` is the global checkpoint number and `gci_lo` the epoch within it (NDB's
//! layout). Rows keep `gci_hi` (a u32) in their header.
//!
//! - An **epoch** ends every TimeBetweenEpochs: commits entering from then on get the
//!   next `gci_lo`. [`GlobalCheckpoint::next_epoch`] takes the commit gate exclusively,
//!   so it returns only once every commit of the old epoch has applied its changes and
//!   appended its redo records (NDB's GCP_PREPARE/GCP_COMMIT: no commit straddles the
//!   cut).
//! - A **global checkpoint** every TimeBetweenGlobalCheckpoints closes `gci_hi` the same
//!   way (the next commit gets `gci_hi + 1`, epoch 0), then asks every data node to make
//!   its redo durable up to that cut and to record the GCI in its system file
//!   ([`GcpSaver::save`], NDB's GCP_SAVEREQ + COPY_GCIREQ). Only when every node has
//!   saved is the GCI durable: [`GlobalCheckpoint::wait_durable`] returns, and a system
//!   restart recovers at least that far.
//!
//! A save that fails (an fsync error) fails the checkpoint for good: waiters get the
//! error, no later GCI becomes durable, and the caller stops the node — an fsync is
//! never retried (after a failed writeback the kernel may have dropped the data).
//!
//! The protocol is driven by [`GlobalCheckpoint::on_timer`] with the caller's clock
//! (milliseconds), so the simulator and the tests drive it without threads or wall time;
//! the cluster's driver thread sleeps in [`GlobalCheckpoint::nap`] between ticks.
//!
//! Durable commit on demand: NDB makes a commit durable at the next checkpoint,
//! TimeBetweenGlobalCheckpoints later. A client that waits for durability here
//! ([`GlobalCheckpoint::wait_durable`]) asks for the checkpoint at once; every commit
//! waiting meanwhile rides on the same checkpoint (group commit), so the wait is about
//! one round of redo fsyncs rather than half a checkpoint interval.
//!
//! **Driven from outside** ([`GlobalCheckpoint::set_external`]): in a data node process
//! (`rndbd`) the cluster's checkpoints are cut by the master data node for every node
//! at once (`cluster/datapath/gcp.rs`). The timer then only ends epochs; the data path
//! moves the checkpoint number on with [`GlobalCheckpoint::cut_to`] and saves a closed
//! one with [`GlobalCheckpoint::save_closed`]; a wait for durability asks it for a
//! checkpoint ([`GlobalCheckpoint::take_request`]) instead of running one here.
//!
//! Lock order: the commit gate (read by commits, written by the epoch cut) is taken
//! before any fragment mutex; nobody may enter a commit while holding a fragment mutex.
//! `state` is a leaf lock.

use crate::error::{NdbError, Result};
use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The checkpoint number of a 64-bit GCI.
#[inline]
pub const fn gci_hi(gci: u64) -> u32 {
    (gci >> 32) as u32
}

/// A 64-bit GCI from its checkpoint number and epoch.
#[inline]
pub const fn make_gci(hi: u32, lo: u32) -> u64 {
    (hi as u64) << 32 | lo as u64
}

/// One data node's part of a global checkpoint.
pub trait GcpSaver: Send + Sync {
    /// Makes every redo record of GCIs up to `gci_hi` durable on this node and records
    /// `gci_hi` as the node's last saved GCI. An error stops the node.
    fn save(&self, gci_hi: u32) -> Result<()>;
}

/// A commit in progress: holds the commit gate so that no epoch or checkpoint cut
/// passes it. Drop it once every change and redo record of the commit is in place.
pub struct CommitTicket<'a> {
    pub gci: u64,
    _gate: RwLockReadGuard<'a, ()>,
}

struct GcpState {
    /// Highest `gci_hi` saved on every node.
    durable_hi: u32,
    /// The failure that stopped checkpointing, if any.
    failed: Option<NdbError>,
    /// Timer bookkeeping ([`GlobalCheckpoint::on_timer`]).
    last_epoch_ms: u64,
    last_gcp_ms: u64,
    gcps_completed: u64,
    /// A waiter asked for a checkpoint now.
    requested: bool,
}

/// The GCI source and the global checkpoint protocol of one cluster.
pub struct GlobalCheckpoint {
    gate: RwLock<()>,
    current: AtomicU64,
    /// The highest checkpoint number any commit entered with, or any other change of
    /// rows was stamped with ([`GlobalCheckpoint::note_change`]): while it is durable,
    /// every row a scan can see is restorable through the redo log
    /// ([`GlobalCheckpoint::changes_durable`]).
    changed_hi: AtomicU32,
    state: Mutex<GcpState>,
    durable_changed: Condvar,
    /// Wakes the driver early (a checkpoint was requested).
    wake_driver: Condvar,
    /// Serialises checkpoints (the driver and an explicit [`GlobalCheckpoint::force`]).
    running: Mutex<()>,
    epoch_interval_ms: u64,
    gcp_interval_ms: u64,
    /// Checkpoints are cut and saved by the caller (see the module notes).
    external: std::sync::atomic::AtomicBool,
}

/// What a timer tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcpTick {
    Idle,
    Epoch(u64),
    Checkpoint(u32),
}

impl GlobalCheckpoint {
    /// Starts with `first_hi` as the checkpoint commits get (1 on an initial start; the
    /// restored GCI + 1 after a system restart). `epoch_interval_ms` 0 turns epochs off
    /// (NDB's TimeBetweenEpochs=0).
    pub fn new(first_hi: u32, epoch_interval_ms: u64, gcp_interval_ms: u64) -> GlobalCheckpoint {
        assert!(first_hi >= 1, "GCI 0 means 'never committed'");
        GlobalCheckpoint {
            gate: RwLock::new(()),
            current: AtomicU64::new(make_gci(first_hi, 0)),
            changed_hi: AtomicU32::new(0),
            state: Mutex::new(GcpState {
                durable_hi: first_hi - 1,
                failed: None,
                last_epoch_ms: 0,
                last_gcp_ms: 0,
                gcps_completed: 0,
                requested: false,
            }),
            durable_changed: Condvar::new(),
            wake_driver: Condvar::new(),
            running: Mutex::new(()),
            epoch_interval_ms,
            gcp_interval_ms: gcp_interval_ms.max(1),
            external: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// From now on checkpoints are cut and saved from outside (a data node process:
    /// the master data node decides for every node); the timer only ends epochs.
    pub fn set_external(&self) {
        self.external.store(true, Ordering::Release);
    }

    pub fn is_external(&self) -> bool {
        self.external.load(Ordering::Acquire)
    }

    /// Moves the checkpoint number on to `hi` (epoch 0) once every commit entered
    /// before is done; nothing when it is already there. Returns the checkpoint
    /// number current before.
    pub fn cut_to(&self, hi: u32) -> u32 {
        let current_hi = gci_hi(self.current.load(Ordering::Acquire));
        if current_hi >= hi {
            return current_hi;
        }
        let _cut = self.gate.write();
        let old = gci_hi(self.current.load(Ordering::Acquire));
        if old < hi {
            self.current.store(make_gci(hi, 0), Ordering::Release);
        }
        old
    }

    /// Saves the closed checkpoint `hi` (below the current number) on `savers` and
    /// records it durable here. A failure fails checkpointing for good, as in
    /// [`GlobalCheckpoint::force`]; a checkpoint at or below the durable one is
    /// already saved.
    pub fn save_closed(&self, hi: u32, savers: &[&dyn GcpSaver]) -> Result<()> {
        let _one = self.running.lock();
        if let Some(e) = self.failure() {
            return Err(e);
        }
        if hi <= self.durable_hi() {
            return Ok(());
        }
        assert!(
            hi < gci_hi(self.current()),
            "checkpoint {hi} saved while still open"
        );
        self.save_all(hi, savers)
    }

    /// A waiter asked for a checkpoint since the last call (external mode: the data
    /// path asks its master for one).
    pub fn take_request(&self) -> bool {
        std::mem::take(&mut self.state.lock().requested)
    }

    /// Enters a commit: its GCI is fixed until the ticket is dropped.
    pub fn enter_commit(&self) -> CommitTicket<'_> {
        let guard = self.gate.read();
        let gci = self.current.load(Ordering::Acquire);
        self.note_change(gci_hi(gci));
        CommitTicket { gci, _gate: guard }
    }

    /// Records that rows were changed with checkpoint number `hi` outside a commit
    /// (a node restart's sweep of deleted rows, OPTIMIZE's moves). Commits are
    /// recorded by [`GlobalCheckpoint::enter_commit`].
    pub fn note_change(&self, hi: u32) {
        // A load first: the common case (the same number as the last commit) writes
        // nothing to the shared line.
        if self.changed_hi.load(Ordering::Acquire) < hi {
            self.changed_hi.fetch_max(hi, Ordering::AcqRel);
        }
    }

    /// Every change recorded so far (commits entered, [`GlobalCheckpoint::note_change`])
    /// has a checkpoint number that is durable on every node. A reader that saw a
    /// change before calling this (under the fragment's mutex the writer held) gets
    /// false until that change's checkpoint is durable.
    pub fn changes_durable(&self) -> bool {
        let changed = self.changed_hi.load(Ordering::Acquire);
        changed <= self.state.lock().durable_hi
    }

    /// The GCI a commit entering now would get.
    pub fn current(&self) -> u64 {
        self.current.load(Ordering::Acquire)
    }

    /// The highest checkpoint number durable on every node.
    pub fn durable_hi(&self) -> u32 {
        self.state.lock().durable_hi
    }

    pub fn gcps_completed(&self) -> u64 {
        self.state.lock().gcps_completed
    }

    /// The failure that stopped checkpointing, if any.
    pub fn failure(&self) -> Option<NdbError> {
        self.state.lock().failed.clone()
    }

    /// Ends the current epoch once every commit in it is done; returns the ended GCI.
    pub fn next_epoch(&self) -> u64 {
        let _cut = self.gate.write();
        let old = self.current.load(Ordering::Acquire);
        assert!(
            (old as u32) < u32::MAX,
            "epoch counter overflow within one GCI"
        );
        self.current.store(old + 1, Ordering::Release);
        old
    }

    /// Closes the current checkpoint number, once every commit stamped with it is done.
    fn close_gci(&self) -> u32 {
        let _cut = self.gate.write();
        let hi = gci_hi(self.current.load(Ordering::Acquire));
        assert!(hi < u32::MAX, "GCI overflow");
        self.current.store(make_gci(hi + 1, 0), Ordering::Release);
        hi
    }

    /// Runs one global checkpoint now: closes the current GCI and saves it on every
    /// node. Returns the GCI made durable. After a failure every call fails with it.
    pub fn force(&self, savers: &[&dyn GcpSaver]) -> Result<u32> {
        let _one = self.running.lock();
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let hi = self.close_gci();
        self.save_all(hi, savers).map(|()| hi)
    }

    /// Saves the closed `hi` on every saver and records it durable (or the failure).
    fn save_all(&self, hi: u32, savers: &[&dyn GcpSaver]) -> Result<()> {
        // The nodes save in parallel (each an fdatasync or two of its own files).
        let failed = match savers {
            [] => None,
            [one] => one.save(hi).err(),
            many => std::thread::scope(|scope| {
                let handles: Vec<_> = many[1..]
                    .iter()
                    .map(|s| scope.spawn(move || s.save(hi)))
                    .collect();
                let mut first = many[0].save(hi).err();
                for h in handles {
                    let r = h.join().unwrap_or_else(|_| {
                        Err(crate::error::codes::internal("a GCP save thread panicked"))
                    });
                    if let (None, Err(e)) = (&first, r) {
                        first = Some(e);
                    }
                }
                first
            }),
        };
        if let Some(e) = failed {
            let mut st = self.state.lock();
            st.failed = Some(e.clone());
            drop(st);
            self.durable_changed.notify_all();
            return Err(e);
        }
        let mut st = self.state.lock();
        debug_assert!(hi > st.durable_hi);
        st.durable_hi = hi;
        st.gcps_completed += 1;
        drop(st);
        self.durable_changed.notify_all();
        Ok(())
    }

    /// Advances epochs and checkpoints by the caller's clock (`now_ms` from any fixed
    /// origin). At most one step per call.
    pub fn on_timer(&self, now_ms: u64, savers: &[&dyn GcpSaver]) -> Result<GcpTick> {
        let (gcp_due, epoch_due) = {
            let st = self.state.lock();
            (
                st.requested || now_ms.saturating_sub(st.last_gcp_ms) >= self.gcp_interval_ms,
                self.epoch_interval_ms > 0
                    && now_ms.saturating_sub(st.last_epoch_ms) >= self.epoch_interval_ms,
            )
        };
        let gcp_due = gcp_due && !self.is_external();
        if gcp_due {
            {
                let mut st = self.state.lock();
                st.last_gcp_ms = now_ms;
                st.last_epoch_ms = now_ms;
                st.requested = false;
            }
            return self.force(savers).map(GcpTick::Checkpoint);
        }
        if epoch_due {
            self.state.lock().last_epoch_ms = now_ms;
            return Ok(GcpTick::Epoch(self.next_epoch()));
        }
        Ok(GcpTick::Idle)
    }

    /// Milliseconds from `now_ms` until the next epoch or checkpoint is due.
    pub fn next_due_ms(&self, now_ms: u64) -> u64 {
        let st = self.state.lock();
        let external = self.is_external();
        if st.requested && !external {
            return 0;
        }
        let gcp = if external {
            // Only epochs are this driver's; checkpoints come from outside.
            self.gcp_interval_ms
        } else {
            (st.last_gcp_ms + self.gcp_interval_ms).saturating_sub(now_ms)
        };
        if self.epoch_interval_ms == 0 {
            return gcp;
        }
        gcp.min((st.last_epoch_ms + self.epoch_interval_ms).saturating_sub(now_ms))
    }

    /// The driver's sleep: up to `max`, ended early when a checkpoint is requested.
    pub fn nap(&self, max: Duration) {
        let mut st = self.state.lock();
        if !st.requested || self.is_external() {
            self.wake_driver.wait_for(&mut st, max);
        }
    }

    /// Ends the driver's nap now (the cluster is closing).
    pub fn wake_driver(&self) {
        let _st = self.state.lock();
        self.wake_driver.notify_all();
    }

    /// Blocks until the checkpoint holding `gci` is durable on every node, asking for
    /// that checkpoint at once. Error 4008 ("Receive from NDB failed", unknown result)
    /// after `timeout`; the stopping error when checkpointing failed.
    pub fn wait_durable(&self, gci: u64, timeout: Duration) -> Result<()> {
        let want = gci_hi(gci);
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock();
        if st.durable_hi < want && st.failed.is_none() && !st.requested {
            st.requested = true;
            self.wake_driver.notify_all();
        }
        loop {
            if st.durable_hi >= want {
                return Ok(());
            }
            if let Some(e) = &st.failed {
                return Err(e.clone());
            }
            if self
                .durable_changed
                .wait_until(&mut st, deadline)
                .timed_out()
                && st.durable_hi < want
            {
                return Err(crate::error::codes::durable_wait_timeout(gci, timeout));
            }
        }
    }

    /// Marks checkpointing failed (the cluster is stopping) and wakes every waiter.
    pub fn fail(&self, e: NdbError) {
        let mut st = self.state.lock();
        if st.failed.is_none() {
            st.failed = Some(e);
        }
        drop(st);
        self.durable_changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::codes;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;

    #[derive(Default)]
    struct Recorder {
        saved: Mutex<Vec<u32>>,
        fail_at: AtomicU32,
    }

    impl GcpSaver for Recorder {
        fn save(&self, hi: u32) -> Result<()> {
            if self.fail_at.load(Ordering::Relaxed) == hi {
                return Err(codes::file_system_error("fsync failed"));
            }
            self.saved.lock().push(hi);
            Ok(())
        }
    }

    #[test]
    fn epochs_and_checkpoints_advance_on_the_callers_clock() {
        let g = GlobalCheckpoint::new(1, 100, 2000);
        let r = Recorder::default();
        let s: [&dyn GcpSaver; 1] = [&r];
        assert_eq!(g.current(), make_gci(1, 0));
        assert_eq!(g.on_timer(50, &s).unwrap(), GcpTick::Idle);
        assert_eq!(g.on_timer(100, &s).unwrap(), GcpTick::Epoch(make_gci(1, 0)));
        assert_eq!(g.current(), make_gci(1, 1));
        assert_eq!(g.next_due_ms(150), 50);
        assert_eq!(g.on_timer(2000, &s).unwrap(), GcpTick::Checkpoint(1));
        assert_eq!(g.current(), make_gci(2, 0));
        assert_eq!(g.durable_hi(), 1);
        assert_eq!(*r.saved.lock(), vec![1]);
        // epochs off: only checkpoints
        let g = GlobalCheckpoint::new(7, 0, 10);
        assert_eq!(g.on_timer(5, &s).unwrap(), GcpTick::Idle);
        assert_eq!(g.on_timer(10, &s).unwrap(), GcpTick::Checkpoint(7));
    }

    #[test]
    fn changes_are_durable_once_their_checkpoint_is() {
        let g = GlobalCheckpoint::new(5, 0, 1000);
        let r = Recorder::default();
        // A restart's first number: nothing changed since the restored checkpoint 4.
        assert!(g.changes_durable());
        drop(g.enter_commit());
        assert!(!g.changes_durable(), "a commit in checkpoint 5, 4 durable");
        assert_eq!(g.force(&[&r]).unwrap(), 5);
        assert!(g.changes_durable());
        // A change outside a commit (a sweep, a move) counts the same.
        g.note_change(6);
        assert!(!g.changes_durable());
        assert_eq!(g.force(&[&r]).unwrap(), 6);
        assert!(g.changes_durable());
        // A number already durable changes nothing.
        g.note_change(3);
        assert!(g.changes_durable());
    }

    #[test]
    fn a_cut_waits_for_commits_in_flight() {
        let g = Arc::new(GlobalCheckpoint::new(1, 100, 1000));
        let ticket = g.enter_commit();
        assert_eq!(ticket.gci, make_gci(1, 0));
        let g2 = g.clone();
        let cut = std::thread::spawn(move || {
            let r = Recorder::default();
            g2.force(&[&r]).unwrap()
        });
        std::thread::sleep(Duration::from_millis(50));
        // the checkpoint cannot close GCI 1 while this commit holds it
        assert_eq!(g.durable_hi(), 0);
        assert!(!cut.is_finished());
        drop(ticket);
        assert_eq!(cut.join().unwrap(), 1);
        assert_eq!(g.durable_hi(), 1);
        assert_eq!(g.enter_commit().gci, make_gci(2, 0));
    }

    #[test]
    fn wait_durable_returns_once_saved_everywhere() {
        let g = Arc::new(GlobalCheckpoint::new(1, 0, 1000));
        let gci = g.enter_commit().gci;
        let g2 = g.clone();
        let waiter = std::thread::spawn(move || g2.wait_durable(gci, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished());
        let (a, b) = (Recorder::default(), Recorder::default());
        g.force(&[&a, &b]).unwrap();
        waiter.join().unwrap().unwrap();
        assert_eq!(*b.saved.lock(), vec![1]);
        // already durable: immediate
        g.wait_durable(gci, Duration::ZERO).unwrap();
        // not yet durable: times out with an unknown-result error
        let later = g.enter_commit().gci;
        let e = g.wait_durable(later, Duration::from_millis(5)).unwrap_err();
        assert_eq!(e.code, 4008);
    }

    #[test]
    fn a_durability_waiter_asks_for_the_checkpoint_at_once() {
        let g = Arc::new(GlobalCheckpoint::new(1, 0, 60_000));
        let r = Recorder::default();
        let s: [&dyn GcpSaver; 1] = [&r];
        assert_eq!(g.on_timer(1, &s).unwrap(), GcpTick::Idle);
        let gci = g.enter_commit().gci;
        let g2 = g.clone();
        let waiter = std::thread::spawn(move || g2.wait_durable(gci, Duration::from_secs(10)));
        // the driver's nap ends early and the checkpoint runs long before it is due
        let t0 = Instant::now();
        loop {
            g.nap(Duration::from_secs(5));
            if g.next_due_ms(2) == 0 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(4), "nap not woken");
        }
        assert_eq!(g.on_timer(2, &s).unwrap(), GcpTick::Checkpoint(1));
        waiter.join().unwrap().unwrap();
        // the request is consumed: the next tick is idle again
        assert_eq!(g.on_timer(3, &s).unwrap(), GcpTick::Idle);
    }

    #[test]
    fn checkpoints_driven_from_outside_cut_and_save_only_when_told() {
        let g = Arc::new(GlobalCheckpoint::new(1, 100, 10));
        g.set_external();
        let r = Recorder::default();
        let s: [&dyn GcpSaver; 1] = [&r];
        // the timer ends epochs only
        assert_eq!(g.on_timer(50, &s).unwrap(), GcpTick::Idle);
        assert_eq!(g.on_timer(100, &s).unwrap(), GcpTick::Epoch(make_gci(1, 0)));
        assert_eq!(g.durable_hi(), 0);
        // a waiter asks; the request is taken once, and the driver does not spin on it
        let gci = g.enter_commit().gci;
        let g2 = g.clone();
        let waiter = std::thread::spawn(move || g2.wait_durable(gci, Duration::from_secs(10)));
        let t0 = Instant::now();
        while !g.take_request() {
            assert!(t0.elapsed() < Duration::from_secs(5), "no request");
            std::thread::yield_now();
        }
        assert!(!g.take_request());
        assert_eq!(g.next_due_ms(150), 10, "a nap, not 0 for the request");
        // the master's cut, then its save
        assert_eq!(g.cut_to(4), 1);
        assert_eq!(g.cut_to(3), 4, "never backwards");
        assert_eq!(g.current(), make_gci(4, 0));
        g.save_closed(3, &s).unwrap();
        waiter.join().unwrap().unwrap();
        assert_eq!(g.durable_hi(), 3);
        assert_eq!(*r.saved.lock(), vec![3]);
        // saved already: nothing written again
        g.save_closed(2, &s).unwrap();
        assert_eq!(*r.saved.lock(), vec![3]);
    }

    #[test]
    fn a_failed_save_stops_checkpointing_for_good() {
        let g = GlobalCheckpoint::new(1, 0, 10);
        let r = Recorder::default();
        r.fail_at.store(2, Ordering::Relaxed);
        g.force(&[&r]).unwrap();
        let gci = g.enter_commit().gci;
        assert_eq!(gci_hi(gci), 2);
        let e = g.force(&[&r]).unwrap_err();
        assert_eq!(e.code, codes::file_system_error("x").code);
        assert_eq!(g.durable_hi(), 1);
        assert!(g.wait_durable(gci, Duration::from_secs(5)).is_err());
        // never retried, even if the disk would now accept the write
        r.fail_at.store(0, Ordering::Relaxed);
        assert!(g.force(&[&r]).is_err());
        assert_eq!(*r.saved.lock(), vec![1]);
    }
}
