//! Pacing of checkpoint writes between MinDiskWriteSpeed and MaxDiskWriteSpeed.
//!
//! NDB 7.6.7's adaptive LCP control (`EnableRedoControl`) raises the LCP write speed as
//! the redo log fills: Backup.cpp puts the redo log in alert states by fill level (LOW
//! above 25%, HIGH above 40%, CRITICAL above 60%) and speeds the LCP up more in each.
//! The curve here is the continuous version of that:
//!
//! ```text
//! rate
//! max |                 ________________
//!     |               /
//!     |             /
//! min |____________/
//!     +-----------+------+-------------- redo fill %
//!     0          25      60           100
//! ```
//!
//! MinDiskWriteSpeed while the redo log is at most 25% full (no alert: checkpoints stay
//! out of the way of the foreground), rising linearly to MaxDiskWriteSpeed at 60%
//! (NDB's critical level) and staying there above.
//!
//! [`DiskWritePacer`] is pure: the caller reports the redo fill level, asks
//! [`DiskWritePacer::delay_for`] how long to wait after writing some bytes since the
//! start of a pacing period, and does the sleeping itself (no clock in here).

use std::time::Duration;

/// At or below this redo fill level the pacer writes at the minimum speed.
pub const REDO_FILL_SPEEDUP_PERCENT: u32 = 25;
/// At or above this redo fill level the pacer writes at the maximum speed.
pub const REDO_FILL_FULL_SPEED_PERCENT: u32 = 60;

/// Checkpoint write pacing. Invariant: `1 <= min <= max` bytes per second.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskWritePacer {
    min_bytes_per_sec: u64,
    max_bytes_per_sec: u64,
    current_bytes_per_sec: u64,
}

impl DiskWritePacer {
    /// A pacer at the minimum speed. A max below the min is raised to it; 0 is taken as 1.
    pub fn new(min_bytes_per_sec: u64, max_bytes_per_sec: u64) -> DiskWritePacer {
        let min = min_bytes_per_sec.max(1);
        let max = max_bytes_per_sec.max(min);
        DiskWritePacer {
            min_bytes_per_sec: min,
            max_bytes_per_sec: max,
            current_bytes_per_sec: min,
        }
    }

    pub fn min_bytes_per_sec(&self) -> u64 {
        self.min_bytes_per_sec
    }

    pub fn max_bytes_per_sec(&self) -> u64 {
        self.max_bytes_per_sec
    }

    /// The target speed for a redo log `redo_fill_percent` full (the curve of the
    /// module doc; values above 100 count as 100).
    pub fn target_rate(&self, redo_fill_percent: u32) -> u64 {
        let fill = redo_fill_percent.min(100);
        if fill <= REDO_FILL_SPEEDUP_PERCENT {
            return self.min_bytes_per_sec;
        }
        if fill >= REDO_FILL_FULL_SPEED_PERCENT {
            return self.max_bytes_per_sec;
        }
        let span = u128::from(self.max_bytes_per_sec - self.min_bytes_per_sec);
        let step = u128::from(fill - REDO_FILL_SPEEDUP_PERCENT);
        let width = u128::from(REDO_FILL_FULL_SPEED_PERCENT - REDO_FILL_SPEEDUP_PERCENT);
        self.min_bytes_per_sec + (span * step / width) as u64
    }

    /// Set the current speed from the redo fill level; returns it.
    pub fn set_redo_fill_percent(&mut self, redo_fill_percent: u32) -> u64 {
        self.current_bytes_per_sec = self.target_rate(redo_fill_percent);
        self.current_bytes_per_sec
    }

    /// The current speed in bytes per second.
    pub fn current_rate(&self) -> u64 {
        self.current_bytes_per_sec
    }

    /// How long to wait now so that `bytes_written` since the start of the pacing
    /// period, `elapsed` ago, does not exceed the current speed. Zero when behind.
    pub fn delay_for(&self, bytes_written: u64, elapsed: Duration) -> Duration {
        let due_nanos =
            u128::from(bytes_written) * 1_000_000_000 / u128::from(self.current_bytes_per_sec);
        let due = Duration::from_nanos(due_nanos.min(u128::from(u64::MAX)) as u64);
        due.saturating_sub(elapsed)
    }
}
