//! Fault injection of [`super::MemFileSystem`]: fixed switches ([`Faults`]), seeded
//! random faults ([`FaultPlan`]), "fail the Nth operation from now" countdowns, and the
//! counters ([`MemStats`]).
//!
//! Which calls are which [`IoOp`]: `Read` = `DiskFile::read_at` and
//! `FileSystem::read_all` (of a file that exists); `Sync` =
//! `DiskFile::sync_data`; `Write` = every call that changes a file or the namespace
//! except `remove` and `create_dir_all`: `write_at`, `extend_to`, `create`,
//! `create_sparse`, `write_atomic`, `rename`. ENOSPC comes only from calls that
//! allocate space (a create, a write or extend beyond the allocated size,
//! `write_atomic`), after the EIO checks passed.
//!
//! Determinism: whether the plan fails an operation is a hash of the plan's seed, the
//! kind (read, write, sync, allocation), the file's path, the offset (0 for a sync and
//! the namespace calls, the new length for `extend_to`) and how many operations of that
//! kind hit that path and offset before under the plan. It does not depend on the order
//! of operations on other files or offsets, so threads that interleave their I/O (the
//! redo log's background writer, the parallel fdatasync of redo files, the GCP thread)
//! do not change which operations of the simulator fail. Switches and countdowns do
//! not use it (a countdown counts every operation of its kind, in the order they come).
//! Every injected failure is logged (kind, path, offset, thread; the first
//! [`FAULT_LOG_MAX`]) for a failing test to print.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use super::eio;

/// Injected failures kept in the fault log of a [`super::MemFileSystem`].
pub const FAULT_LOG_MAX: usize = 200;

/// Faults a [`super::MemFileSystem`] injects; change them at any time through
/// [`super::MemFileSystem::set_faults`].
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Total bytes the "disk" holds (`None`: unlimited). Allocation beyond: ENOSPC.
    pub capacity_bytes: Option<u64>,
    /// Reads fail with EIO.
    pub fail_reads: bool,
    /// Writes (every [`IoOp::Write`] call) fail with EIO.
    pub fail_writes: bool,
    /// fdatasync fails with EIO.
    pub fail_syncs: bool,
    /// When set, the three switches above apply only to files whose path contains
    /// this text (e.g. `"/LCP/"`, `"P0.SchemaLog"`); other files work.
    pub only_paths_containing: Option<String>,
}

/// Seeded random faults, set with [`super::MemFileSystem::set_fault_plan`]. Rates are
/// per million operations of the kind; 0 disables that kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    pub seed: u64,
    /// EIO on `read_at` and `read_all`.
    pub read_eio_per_million: u32,
    /// EIO on write operations (see the module doc for the list).
    pub write_eio_per_million: u32,
    /// EIO on `sync_data` (its unsynced writes are then lost for good).
    pub sync_eio_per_million: u32,
    /// ENOSPC on operations that allocate space.
    pub enospc_per_million: u32,
}

/// A kind of operation, for [`super::MemFileSystem::fail_nth`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoOp {
    Read,
    Write,
    Sync,
}

/// Counters of a [`super::MemFileSystem`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    /// `read_at` and `read_all` calls (of files that exist).
    pub reads: u64,
    /// `write_at` and `write_atomic` calls.
    pub writes: u64,
    /// `sync_data` calls.
    pub syncs: u64,
    /// Every injected failure (the sum of the four below).
    pub injected_failures: u64,
    pub injected_read_eio: u64,
    pub injected_write_eio: u64,
    pub injected_sync_eio: u64,
    pub injected_enospc: u64,
    /// Unsynced writes discarded by a failed sync: they never become durable.
    pub lost_writes: u64,
    /// Unsynced writes made durable early because a file exceeded the unsynced cap.
    pub written_back: u64,
    /// Operations refused because an armed power loss happened (not injected faults).
    pub after_power_loss: u64,
}

/// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, good enough for fault choices.
#[derive(Clone, Debug)]
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    pub(super) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
    pub(super) fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }
}

/// splitmix64's finalizer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a path's bytes (stable across runs and builds).
fn path_hash(path: &Path) -> u64 {
    path.as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

/// What a plan decision is about (the kind salts the hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Draw {
    Read = 0,
    Write = 1,
    Sync = 2,
    Alloc = 3,
}

/// A seeded plan and how often each (kind, path, offset) was drawn for.
pub(super) struct Plan {
    pub(super) plan: FaultPlan,
    seen: BTreeMap<(Draw, u64, u64), u64>,
}

impl Plan {
    /// Whether the next operation of `draw` at `path` / `offset` fails, at `rate` per
    /// million.
    fn hit(&mut self, draw: Draw, rate: u32, path: &Path, offset: u64) -> bool {
        if rate == 0 {
            return false;
        }
        let ph = path_hash(path);
        let n = self.seen.entry((draw, ph, offset)).or_insert(0);
        let occurrence = *n;
        *n += 1;
        let mut h = self.plan.seed;
        for x in [draw as u64, ph, offset, occurrence] {
            h = mix64(h ^ x).wrapping_add(0x9E37_79B9_7F4A_7C15);
        }
        let r = ((u128::from(mix64(h)) * 1_000_000) >> 64) as u64;
        r < u64::from(rate)
    }
}

/// The fault state of one MemFileSystem (inside its state mutex).
#[derive(Default)]
pub(super) struct Injector {
    pub(super) faults: Faults,
    pub(super) plan: Option<Plan>,
    /// Operations of each kind (Read, Write, Sync) until the armed failure; 0 = none.
    countdown: [u64; 3],
    pub(super) stats: MemStats,
    /// The first [`FAULT_LOG_MAX`] injected failures.
    pub(super) log: Vec<String>,
}

fn index(op: IoOp) -> usize {
    match op {
        IoOp::Read => 0,
        IoOp::Write => 1,
        IoOp::Sync => 2,
    }
}

impl Injector {
    pub(super) fn set_plan(&mut self, plan: Option<FaultPlan>) {
        self.plan = plan.map(|plan| Plan {
            plan,
            seen: BTreeMap::new(),
        });
    }

    fn note(&mut self, what: &str, path: &Path, offset: u64) {
        if self.log.len() < FAULT_LOG_MAX {
            let thread = std::thread::current();
            self.log.push(format!(
                "{what} {} @{offset} on thread {}",
                path.display(),
                thread.name().unwrap_or("?")
            ));
        }
    }

    pub(super) fn arm(&mut self, op: IoOp, n: u64) {
        self.countdown[index(op)] = n;
    }

    /// Whether operation `op` on the file at `path`, at `offset`, fails now with EIO;
    /// counted and logged.
    pub(super) fn check(&mut self, op: IoOp, path: &Path, offset: u64) -> io::Result<()> {
        let scoped = self
            .faults
            .only_paths_containing
            .as_deref()
            .is_none_or(|part| path.to_string_lossy().contains(part));
        let switch = scoped
            && match op {
                IoOp::Read => self.faults.fail_reads,
                IoOp::Write => self.faults.fail_writes,
                IoOp::Sync => self.faults.fail_syncs,
            };
        let c = &mut self.countdown[index(op)];
        let counted_down = *c > 0 && {
            *c -= 1;
            *c == 0
        };
        let planned = match &mut self.plan {
            Some(p) => {
                let (draw, rate) = match op {
                    IoOp::Read => (Draw::Read, p.plan.read_eio_per_million),
                    IoOp::Write => (Draw::Write, p.plan.write_eio_per_million),
                    IoOp::Sync => (Draw::Sync, p.plan.sync_eio_per_million),
                };
                p.hit(draw, rate, path, offset)
            }
            None => false,
        };
        if !(switch || counted_down || planned) {
            return Ok(());
        }
        self.stats.injected_failures += 1;
        match op {
            IoOp::Read => self.stats.injected_read_eio += 1,
            IoOp::Write => self.stats.injected_write_eio += 1,
            IoOp::Sync => self.stats.injected_sync_eio += 1,
        }
        self.note(&format!("{op:?} EIO"), path, offset);
        Err(eio())
    }

    /// Check an allocation of `extra` bytes at `path` / `offset` when `used` are in use
    /// (ENOSPC beyond the capacity, or drawn from the plan).
    pub(super) fn reserve(
        &mut self,
        used: impl FnOnce() -> u64,
        extra: u64,
        path: &Path,
        offset: u64,
    ) -> io::Result<()> {
        if extra == 0 {
            return Ok(());
        }
        let planned = match &mut self.plan {
            Some(p) => {
                let rate = p.plan.enospc_per_million;
                p.hit(Draw::Alloc, rate, path, offset)
            }
            None => false,
        };
        let over = self
            .faults
            .capacity_bytes
            .is_some_and(|cap| used().saturating_add(extra) > cap);
        if !(planned || over) {
            return Ok(());
        }
        self.stats.injected_failures += 1;
        self.stats.injected_enospc += 1;
        self.note("ENOSPC", path, offset);
        Err(io::Error::from_raw_os_error(libc::ENOSPC))
    }
}
