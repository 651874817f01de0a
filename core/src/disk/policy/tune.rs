//! The race between an LRU expert and a LIRS expert on sampled references, deciding
//! which hot limit (mode) the cache runs with.
//!
//! - The LRU expert: an LRU cache of `k` pages hits exactly the references whose stack
//!   distance is below `k`; inside the advisor the reuse histogram gives that for free,
//!   the stand-alone [`Tuner`] (advisor disabled) runs an exact LRU miniature instead.
//! - The LIRS expert is a miniature simulation: the same LIRS core with a fixed HIR share
//!   (1%, as in the paper and PGMAN) at the sampled capacity.
//!
//! Per sampled reference the race adds `d = lirs_hit - lru_hit` to a decayed lead `D`
//! and `d^2` (a disagreement) to `V`. The mode changes when the other expert's lead is
//! significant: `D - margin > z * sqrt(V)` (a sequential test; `D` and `V` restart at
//! each change; decay window 16 cache sizes). On a loop the LIRS expert wins every
//! disagreement and the test fires after a few dozen references; on LRU-friendly traces
//! such as `sprite`, where LIRS leads only in short bursts, `V` grows as fast as `D` and
//! the cache stays LRU.
//!
//! The race starts in LRU mode. That choice is forced: `scan` and `zigzag` share their
//! first 2,001 references, after which `scan` wants the oldest pages kept (LIRS) and
//! `zigzag` the newest (LRU). Starting in LRU matches LRU exactly on zigzag, and the
//! switch to LIRS fills the hot part with the pages already resident (see
//! `Lirs::settle`), which keeps scan, loop and cs within 1-4% of plain LIRS.
//!
//! Invariants: `D`, `V` restart at each mode change; `V >= |D|` without decay.
//! Complexity: O(1) per sampled reference (one LIRS step, two for the stand-alone tuner).

use super::lirs::{Lirs, Outcome, PageId};
use super::shards::Sampler;

/// Replacement mode of a cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Hot limit 0: the queue is an LRU list of all resident pages.
    #[default]
    Lru,
    /// Hot limit `capacity - max(2, hir_fraction * capacity)`: LIRS as in PGMAN.
    Lirs,
}

/// Parameters of the race.
#[derive(Clone, Debug)]
pub struct RaceConfig {
    /// A stand-alone [`Tuner`] samples at `min(1, sample_pages / capacity)`.
    pub sample_pages: usize,
    /// Decay window of `D` and `V`, in sampled cache sizes of references.
    pub window_caches: f64,
    /// Significance factor of the switching test.
    pub z: f64,
    /// Minimum lead in hits.
    pub margin: f64,
}

impl Default for RaceConfig {
    fn default() -> Self {
        RaceConfig {
            sample_pages: 2048,
            window_caches: 16.0,
            z: 3.0,
            margin: 4.0,
        }
    }
}

/// LRU-versus-LIRS race for one cache size.
pub struct Race {
    /// The LIRS expert at the sampled capacity.
    pub lirs: Lirs,
    pub mode: Mode,
    lead: f64,
    var: f64,
    decay: f64,
    window_caches: f64,
    z: f64,
    margin: f64,
    pub switches: u64,
}

impl Race {
    /// A race for a cache of `sampled_capacity` sampled pages.
    pub fn new(
        cfg: &RaceConfig,
        sampled_capacity: usize,
        hir_fraction: f64,
        entries_per_page: usize,
        mode: Mode,
    ) -> Race {
        let cs = sampled_capacity.max(1);
        let window = (cfg.window_caches * cs as f64).max(64.0);
        Race {
            lirs: Lirs::new(
                cs,
                Lirs::hot_limit_for(cs, hir_fraction),
                cs.saturating_mul(entries_per_page),
            ),
            mode,
            lead: 0.0,
            var: 0.0,
            decay: 1.0 - 1.0 / window,
            window_caches: cfg.window_caches,
            z: cfg.z,
            margin: cfg.margin,
            switches: 0,
        }
    }

    /// Follows a change of sampling rate: drops the pages no longer sampled and
    /// resizes the expert to the new sampled capacity.
    pub fn rescale<F: FnMut(PageId) -> bool>(
        &mut self,
        keep: F,
        sampled_capacity: usize,
        hir_fraction: f64,
        entries_per_page: usize,
    ) {
        let cs = sampled_capacity.max(1);
        self.lirs.retain(keep);
        self.lirs.resize(
            cs,
            Lirs::hot_limit_for(cs, hir_fraction),
            cs.saturating_mul(entries_per_page),
            &mut |_| true,
        );
        let window = (self.window_caches * cs as f64).max(64.0);
        self.decay = 1.0 - 1.0 / window;
    }

    /// One sampled reference; `lru_hit` is the LRU expert's outcome. Returns the new
    /// mode when it changes.
    #[inline]
    pub fn step(&mut self, page: PageId, correlated: bool, lru_hit: bool) -> Option<Mode> {
        let lirs_hit = self.lirs.access(page, correlated, &mut |_| true) == Outcome::Hit;
        let d = lirs_hit as i32 - lru_hit as i32;
        self.lead = self.lead * self.decay + d as f64;
        self.var = self.var * self.decay + (d * d) as f64;
        let lead = match self.mode {
            Mode::Lru => self.lead,
            Mode::Lirs => -self.lead,
        } - self.margin;
        if lead > 0.0 && lead * lead > self.z * self.z * self.var {
            self.mode = match self.mode {
                Mode::Lru => Mode::Lirs,
                Mode::Lirs => Mode::Lru,
            };
            self.lead = 0.0;
            self.var = 0.0;
            self.switches += 1;
            return Some(self.mode);
        }
        None
    }
}

/// A stand-alone race for the real cache when the advisor (whose 1x copy normally
/// hosts the race) is disabled: its own sample, an exact LRU miniature as the LRU
/// expert.
pub struct Tuner {
    pub sampler: Sampler,
    pub sampled_capacity: usize,
    pub lru: Lirs,
    pub race: Race,
}

impl Tuner {
    pub fn new(
        cfg: &RaceConfig,
        capacity: usize,
        hir_fraction: f64,
        entries_per_page: usize,
        mode: Mode,
    ) -> Tuner {
        let rate = (cfg.sample_pages.max(1) as f64 / capacity.max(1) as f64).min(1.0);
        let sampler = Sampler::with_rate(rate);
        let cs = ((capacity as f64 * sampler.rate()).round() as usize).max(1);
        Tuner {
            sampler,
            sampled_capacity: cs,
            lru: Lirs::new(cs, 0, cs.saturating_mul(entries_per_page)),
            race: Race::new(cfg, cs, hir_fraction, entries_per_page, mode),
        }
    }

    /// One reference of the real cache; returns the new mode when it changes.
    #[inline]
    pub fn observe(&mut self, page: PageId, correlated: bool) -> Option<Mode> {
        if !self.sampler.takes(page) {
            return None;
        }
        let lru_hit = self.lru.access(page, correlated, &mut |_| true) == Outcome::Hit;
        self.race.step(page, correlated, lru_hit)
    }

    pub fn memory_bytes(&self) -> usize {
        self.lru.memory_bytes() + self.race.lirs.memory_bytes()
    }
}
