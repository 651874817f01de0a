//! The hit-ratio advisor: what hit ratio would the cache have at another size? It also
//! hosts the race that picks the real cache's mode (in its 1x copy).
//!
//! Method (miniature simulation on a SHARDS sample, Waldspurger et al. FAST 2015 and
//! ATC 2017):
//! 1. A fixed-rate spatial sample of the pages (rate `R`, see [`Sampler`]) feeds an exact
//!    LRU stack-distance histogram, which gives the LRU hit ratio at *every* size:
//!    `LRU(s) = P(distance < s * R)`.
//! 2. The cache is not LRU, so at a grid of sizes (by default 1/4, 1/2, 1, 2, 4, 8 and 16
//!    times the capacity) a scaled-down copy of the real policy — the same adaptive LIRS
//!    core and the same LRU/LIRS race, at `size * R` frames — runs on the sampled
//!    references and measures its own hit ratio `A(g)`. Copies above the capacity run
//!    on a nested subsample of at most `frame_pages` frames (as the 1x copy) beside an
//!    exact LRU copy of the same subsample, and `A(g) = LRU(g) + their gain over it`
//!    (see `copy_sampler`). A copy in LRU mode is an LRU cache: its outcome is the LRU
//!    expert's and its structure is rebuilt only when it switches to LIRS
//!    (`MiniCache::step`).
//! 3. At a grid size the prediction is `A(g)`. Between grid sizes it is
//!    `LRU(s) + gain(s)`, the gain `A(g) - LRU(g)` interpolated linearly in size and the
//!    result kept between the neighbouring `A(g)`. Outside the grid the nearest gain is
//!    held.
//! 4. Corrections: SHARDS_adj (the sample holds more or fewer references than `R` times
//!    all of them when popular pages fall in or out of it by chance: the difference
//!    counts as hits at distance 0), and calibration on the real cache (the one
//!    full-size measurement: the difference between its measured ratio and its 1x
//!    copy's is added, fading out over four doublings of the size).
//!
//! Rate: at most `frame_pages / capacity` (bounds the cost), at most `max_rate`, and halved whenever more than
//! `sample_pages` distinct sampled pages are within the largest grid size's reach
//! (fixed-size SHARDS: memory stays bounded; past counts are rescaled by 1/2).
//! Statistics age: every counter is halved every `window` sampled references.
//!
//! Invariants: every grid cache sees exactly its sample of the stream (the advisor's up
//! to 1x, nested subsets above); grid points are sorted by size and their samples shrink
//! with the size; the histogram's horizon covers the largest grid size; a lazy copy is
//! in LRU mode.
//! Complexity per reference: one hash test; per sampled reference O(log sample_pages)
//! for the histogram plus, per grid size up to 1x, one LIRS step in LRU mode (the race's
//! expert) or two in LIRS mode, and above 1x two or three at the copy's lower rate. Memory: bounded by
//! `sample_pages` tracked pages in the histogram and, per grid size, by
//! `min(sampled distinct pages, (1 + entries_per_page) * size * R)` entries (~70 B).

use super::lirs::{Lirs, Outcome, PageId};
use super::shards::{ReuseHist, Sampler, sample_hash};
use super::tune::{Mode, Race, RaceConfig};

/// Settling budget per access (hot pages moved per reference after a mode change).
pub const SETTLE_BUDGET: usize = 64;

/// Smallest sampled size simulated; smaller grid points are left out.
pub const MIN_SAMPLED_SIZE: usize = 8;

/// The sample of the miniature copy of `size` pages: the advisor's `sampler`, or for a
/// copy that would hold more than `frame_pages` frames at that rate (the copies above the
/// capacity) a subset of it at `frame_pages / size`. Spatial samples are nested (a lower
/// threshold on the same hash), so the copy sees every reference of its pages and the
/// histogram still has each one's stack distance. This bounds every copy to the 1x
/// copy's number of frames, and the advisor's cost per reference to about
/// `frame_pages / capacity` times the work of the histogram and the copies up to 1x
/// plus a constant for the copies above it.
fn copy_sampler(sampler: Sampler, size: usize, frame_pages: usize) -> Sampler {
    let own = Sampler::with_rate(frame_pages as f64 / size.max(1) as f64);
    if own.rate() < sampler.rate() {
        own
    } else {
        sampler
    }
}

/// Whether the copies' samples shrink (are nested) as their sizes grow.
fn nested(grid: &[MiniCache]) -> bool {
    grid.windows(2)
        .all(|w| w[0].size < w[1].size && w[0].sampler.rate() >= w[1].sampler.rate())
}

/// Configuration shared by the real cache and its miniature copies.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub hir_fraction: f64,
    pub entries_per_page: usize,
    /// `None`: plain LIRS (no race).
    pub race: Option<RaceConfig>,
}

impl ModelConfig {
    pub fn hot_limit(&self, capacity: usize, mode: Mode) -> usize {
        match mode {
            Mode::Lru => 0,
            Mode::Lirs => Lirs::hot_limit_for(capacity, self.hir_fraction),
        }
    }
    pub fn start_mode(&self) -> Mode {
        if self.race.is_some() {
            Mode::Lru
        } else {
            Mode::Lirs
        }
    }
}

/// A scaled-down copy of the real cache at one grid size: the same LIRS core with the
/// same race (its LIRS expert a second miniature cache, its LRU expert the histogram: a
/// hit when the stack distance is below the size), so that it makes the same mode
/// switches and pays the same transitions as the real cache would at that size.
pub struct MiniCache {
    /// Size in real pages and in sampled pages (at this copy's own rate).
    pub size: usize,
    pub size_s: usize,
    /// This copy's sample: the advisor's, or a subset of it for sizes above the
    /// capacity (at most `frame_pages` frames per copy, see [`Advisor`]).
    pub sampler: Sampler,
    /// The size in pages of the advisor's sample (the histogram's unit): the LRU expert
    /// of the race hits when the stack distance is below it.
    pub lru_size_s: usize,
    /// For a copy on a subsample: an exact LRU cache of `size_s` frames on the same
    /// subsample. Its hits are the LRU baseline of the copy's gain (on the same pages,
    /// so the subsample's luck cancels out) and the outcome of the race's LRU expert.
    pub lru: Option<Lirs>,
    pub lru_hits: u64,
    /// In LRU mode the copy is an LRU cache of `size_s` frames: its outcome is the LRU
    /// expert's (the histogram, or the LRU copy), so `cache` is not stepped (`true`)
    /// and is rebuilt in LRU order when the race switches to LIRS (see
    /// `MiniCache::step`).
    pub lazy: bool,
    pub cache: Lirs,
    pub race: Option<Race>,
    pub hits: u64,
    pub refs: u64,
}

impl MiniCache {
    pub fn new(model: &ModelConfig, size: usize, sampler: Sampler, lru_size_s: usize) -> MiniCache {
        let mode = model.start_mode();
        let size_s = (size as f64 * sampler.rate()).round() as usize;
        MiniCache {
            size,
            size_s,
            sampler,
            lru_size_s,
            lru: None,
            lru_hits: 0,
            lazy: model.race.is_some() && mode == Mode::Lru,
            cache: Lirs::new(
                size_s,
                model.hot_limit(size_s, mode),
                size_s.saturating_mul(model.entries_per_page),
            ),
            race: model
                .race
                .as_ref()
                .map(|rc| Race::new(rc, size_s, model.hir_fraction, model.entries_per_page, mode)),
            hits: 0,
            refs: 0,
        }
    }

    /// One sampled reference (`dist`: its stack distance in the histogram `hist`).
    ///
    /// While the copy is in LRU mode (and settled there) it is an exact LRU cache of
    /// `size_s` frames, so its outcome is the LRU expert's and its own structure is not
    /// stepped: one LIRS step per reference (the race's expert) instead of two. When
    /// the race switches to LIRS the structure is rebuilt as that LRU cache would be
    /// after this reference (a replay of the most recent pages, oldest first, from the
    /// histogram; or a copy of the LRU copy), then its hot limit is raised as in the
    /// real cache. A switch back to LRU makes the copy lazy at once (the real cache
    /// demotes its hot pages over the next references: a transition the copy does not
    /// model).
    #[inline]
    fn step(
        &mut self,
        model: &ModelConfig,
        hist: &ReuseHist,
        page: PageId,
        correlated: bool,
        dist: Option<usize>,
    ) {
        let lru_hit = match &mut self.lru {
            Some(l) => {
                let h = l.access(page, correlated, &mut |_| true) == Outcome::Hit;
                self.lru_hits += h as u64;
                h
            }
            None => dist.is_some_and(|d| d < self.lru_size_s),
        };
        let switch = match &mut self.race {
            Some(race) => race.step(page, correlated, lru_hit),
            None => None,
        };
        let hit = if self.lazy {
            if switch == Some(Mode::Lirs) {
                self.rebuild(model, hist);
                self.lazy = false;
                self.cache
                    .set_hot_limit(model.hot_limit(self.size_s, Mode::Lirs), SETTLE_BUDGET);
            }
            lru_hit
        } else if switch == Some(Mode::Lru) {
            self.lazy = true;
            self.cache = Lirs::new(0, 0, 0);
            lru_hit
        } else {
            let h = self.cache.access(page, correlated, &mut |_| true) == Outcome::Hit;
            self.cache.settle_step(SETTLE_BUDGET);
            h
        };
        self.refs += 1;
        self.hits += hit as u64;
    }

    /// The LRU cache of `size_s` frames (LRU layout: hot limit 0, evicted pages kept as
    /// history) this copy is after the current reference.
    #[cold]
    fn rebuild(&mut self, model: &ModelConfig, hist: &ReuseHist) {
        let n = self.size_s;
        let nonres = n.saturating_mul(model.entries_per_page);
        if let Some(l) = &self.lru {
            self.cache = l.clone();
            return;
        }
        let mut c = Lirs::new(n, 0, nonres);
        for &p in hist.recent(n + nonres).iter().rev() {
            c.access(p, false, &mut |_| true);
        }
        self.cache = c;
    }

    /// Follows a change of sampling rate (see [`Advisor`]).
    fn rescale(&mut self, model: &ModelConfig, sampler: Sampler) {
        let size_s = (self.size as f64 * sampler.rate()).round() as usize;
        self.sampler = sampler;
        self.size_s = size_s;
        if let Some(l) = &mut self.lru {
            l.retain(|p| sampler.takes(p));
            l.resize(
                size_s,
                0,
                size_s.saturating_mul(model.entries_per_page),
                &mut |_| true,
            );
        }
        let mode = self.race.as_ref().map_or(Mode::Lirs, |r| r.mode);
        if !self.lazy {
            self.cache.retain(|p| sampler.takes(p));
            self.cache.resize(
                size_s,
                model.hot_limit(size_s, mode),
                size_s.saturating_mul(model.entries_per_page),
                &mut |_| true,
            );
        }
        if let Some(r) = &mut self.race {
            r.rescale(
                |p| sampler.takes(p),
                size_s,
                model.hir_fraction,
                model.entries_per_page,
            );
        }
    }

    pub fn ratio(&self) -> f64 {
        if self.refs == 0 {
            0.0
        } else {
            self.hits as f64 / self.refs as f64
        }
    }
}

/// The sampler, the reuse histogram and the grid of miniature caches.
pub struct Advisor {
    pub sampler: Sampler,
    pub hist: ReuseHist,
    pub grid: Vec<MiniCache>,
    /// Index in `grid` of the 1x copy (it hosts the race), if there is one.
    one_x: Option<usize>,
    capacity: usize,
    /// Most frames of a miniature copy (rate of the copies above the capacity).
    frame_pages: usize,
    window: u64,
    /// Real cache's hits and references over the same (ageing) window.
    pub real_hits: u64,
    pub real_refs: u64,
    adjust: bool,
}

/// Advisor parameters.
#[derive(Clone, Debug)]
pub struct AdvisorConfig {
    /// Grid sizes as multiples of the capacity (empty: histogram only).
    pub factors: Vec<f64>,
    /// Most distinct pages sampled: the rate starts at 1 and halves whenever more are
    /// tracked (fixed-size SHARDS), so small working sets are simulated exactly.
    pub sample_pages: usize,
    /// Highest sampling rate (the advisor's cost per reference is about this rate
    /// times two LIRS steps per grid cache).
    pub max_rate: f64,
    /// The rate is also at most `frame_pages / capacity`: the 1x miniature cache has at
    /// most this many frames (bounds the cost on small caches with small working sets).
    pub frame_pages: usize,
    /// Halve all counters every this many sampled references.
    pub window: u64,
}

impl AdvisorConfig {
    /// A grid at exactly `sizes` (pages) for a cache of `capacity` pages, plus the
    /// capacity itself (the 1x copy also runs the cache's race): predictions at those
    /// sizes are direct simulations, not interpolations.
    pub fn for_sizes(capacity: usize, sizes: &[usize]) -> AdvisorConfig {
        let c = capacity.max(1) as f64;
        let mut factors: Vec<f64> = sizes.iter().map(|&s| s as f64 / c).collect();
        factors.push(1.0);
        factors.sort_by(f64::total_cmp);
        factors.dedup();
        AdvisorConfig {
            factors,
            ..AdvisorConfig::default()
        }
    }
}

impl Default for AdvisorConfig {
    fn default() -> Self {
        AdvisorConfig {
            factors: vec![0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
            sample_pages: 16384,
            max_rate: 1.0,
            frame_pages: 512,
            window: 1 << 22,
        }
    }
}

impl Advisor {
    pub fn new(cfg: &AdvisorConfig, model: &ModelConfig, capacity: usize) -> Advisor {
        let cap_rate = cfg.frame_pages.max(1) as f64 / capacity.max(1) as f64;
        let sampler = Sampler::with_rate(cfg.max_rate.min(cap_rate));
        let r = sampler.rate();
        let sample_pages = cfg.sample_pages.max(64);
        let max_factor = cfg.factors.iter().copied().fold(1.0f64, f64::max);
        let frame_pages = cfg.frame_pages.max(1);
        let mut grid: Vec<MiniCache> = cfg
            .factors
            .iter()
            .filter_map(|&f| {
                let size = (f * capacity as f64).round() as usize;
                let s = copy_sampler(sampler, size, frame_pages);
                let size_s = (size as f64 * s.rate()).round() as usize;
                let lru_size_s = (size as f64 * r).round() as usize;
                (size_s >= MIN_SAMPLED_SIZE).then(|| {
                    let mut g = MiniCache::new(model, size, s, lru_size_s);
                    if s.rate() < r {
                        let nonres = size_s.saturating_mul(model.entries_per_page);
                        g.lru = Some(Lirs::new(size_s, 0, nonres));
                    }
                    g
                })
            })
            .collect();
        grid.sort_by_key(|g| g.size);
        grid.dedup_by_key(|g| g.size);
        debug_assert!(nested(&grid), "copy samples not nested by size");
        let one_x = grid.iter().position(|g| g.size == capacity);
        Advisor {
            one_x,
            sampler,
            hist: ReuseHist::new(
                (max_factor * capacity as f64 * r).ceil() as usize + 2,
                sample_pages,
            ),
            grid,
            capacity,
            frame_pages,
            window: cfg.window.max(1024),
            real_hits: 0,
            real_refs: 0,
            adjust: true,
        }
    }

    /// The race mode of the 1x copy (`None` without one, or for plain LIRS).
    #[inline]
    pub fn mode(&self) -> Option<Mode> {
        self.one_x
            .and_then(|i| self.grid[i].race.as_ref())
            .map(|r| r.mode)
    }

    /// Mode switches of the 1x copy.
    pub fn switches(&self) -> u64 {
        self.one_x
            .and_then(|i| self.grid[i].race.as_ref())
            .map_or(0, |r| r.switches)
    }

    /// Starts every miniature copy in `mode` (after a resize, the cache keeps its mode).
    pub fn set_mode(&mut self, model: &ModelConfig, mode: Mode) {
        for g in &mut self.grid {
            if let Some(r) = &mut g.race {
                r.mode = mode;
                // A new advisor: the copies are empty, an empty LRU cache is lazy.
                g.lazy = mode == Mode::Lru;
                g.cache
                    .set_hot_limit(model.hot_limit(g.size_s, mode), usize::MAX);
            }
        }
    }

    /// Sampled capacity of the real cache.
    pub fn sampled(&self, size: usize) -> usize {
        ((size as f64 * self.sampler.rate()).round() as usize).max(1)
    }

    /// Records a sampled reference in the histogram and the grid; returns its LRU stack
    /// distance in sampled pages (`None`: first reference or beyond the horizon).
    #[inline]
    pub fn observe(
        &mut self,
        model: &ModelConfig,
        page: PageId,
        correlated: bool,
    ) -> Option<usize> {
        self.observe_hashed(model, page, sample_hash(page), correlated)
    }

    /// [`Advisor::observe`] of a page whose [`sample_hash`] is `h`.
    #[inline]
    pub fn observe_hashed(
        &mut self,
        model: &ModelConfig,
        page: PageId,
        h: u64,
        correlated: bool,
    ) -> Option<usize> {
        let d = self.hist.record(page, correlated);
        for g in &mut self.grid {
            // Copies are sorted by size and their samples nested, smaller sizes in
            // larger samples: a copy that leaves the page out is followed by no copy
            // that takes it.
            if !g.sampler.takes_hash(h) {
                break;
            }
            g.step(model, &self.hist, page, correlated, d);
        }
        if self.hist.total >= self.window {
            self.age();
        }
        if self.hist.over_budget() {
            self.halve_rate(model);
        }
        d
    }

    /// Halves the sampling rate: the pages left out are forgotten everywhere, sampled
    /// sizes and distances are halved. Counters (ratios) carry over.
    fn halve_rate(&mut self, model: &ModelConfig) {
        let s = self.sampler.halved();
        let factor = s.rate() / self.sampler.rate();
        self.sampler = s;
        self.hist.resample(|p| s.takes(p), factor);
        let r = s.rate();
        let frame_pages = self.frame_pages;
        self.grid.retain_mut(|g| {
            g.lru_size_s = (g.size as f64 * r).round() as usize;
            let gs = copy_sampler(s, g.size, frame_pages);
            if gs.rate() == g.sampler.rate() {
                // A copy above the capacity already sampled below the new rate.
                return true;
            }
            if (g.size as f64 * gs.rate()).round() < MIN_SAMPLED_SIZE as f64 {
                return false;
            }
            let factor = gs.rate() / g.sampler.rate();
            g.rescale(model, gs);
            g.hits = (g.hits as f64 * factor).round() as u64;
            g.refs = (g.refs as f64 * factor).round() as u64;
            g.lru_hits = (g.lru_hits as f64 * factor).round() as u64;
            true
        });
        debug_assert!(nested(&self.grid), "copy samples not nested by size");
        self.one_x = self.grid.iter().position(|g| g.size == self.capacity);
    }

    /// Counts a reference of the real cache (every reference, sampled or not).
    #[inline]
    pub fn count_real(&mut self, hit: bool) {
        self.real_refs += 1;
        self.real_hits += hit as u64;
    }

    fn age(&mut self) {
        self.hist.decay();
        for g in &mut self.grid {
            g.hits /= 2;
            g.refs /= 2;
            g.lru_hits /= 2;
        }
        self.real_hits /= 2;
        self.real_refs /= 2;
    }

    /// SHARDS_adj (Waldspurger et al.): the sample should hold `rate x references`
    /// references; the difference (popular pages in or out of the sample by chance) is
    /// counted as hits at the smallest distance. `rate`: the sample's rate (the
    /// advisor's, or a copy's own). Returns the adjusted ratio.
    fn adjusted(&self, rate: f64, hits: f64, refs: f64) -> f64 {
        let expected = rate * self.real_refs as f64;
        if !self.adjust || expected < 1.0 {
            return if refs > 0.0 { hits / refs } else { 0.0 };
        }
        ((hits + expected - refs) / expected).clamp(0.0, 1.0)
    }

    /// LRU hit ratio (0..1) at `capacity` real pages, from the histogram.
    pub fn lru_ratio(&self, capacity: usize) -> f64 {
        let r = self.sampler.rate();
        self.adjusted(
            r,
            self.hist.lru_hits(capacity as f64 * r),
            self.hist.total as f64,
        )
    }

    /// Predicted hit ratio (0..1) of this policy with `capacity` pages.
    ///
    /// At a grid size this is the miniature cache's own ratio. Between two grid sizes
    /// it is the LRU curve (exact at every size) plus the policy's gain over LRU,
    /// interpolated linearly in size, and kept between the two grid ratios (a larger
    /// cache does not do worse): LIRS gains grow linearly with size on loops, and the
    /// LRU curve carries the shape of everything else, such as the cliff where a loop
    /// starts to fit. Outside the grid the nearest gain is held.
    pub fn predict(&self, capacity: usize) -> f64 {
        if self.hist.total == 0 || capacity == 0 {
            return 0.0;
        }
        let r = self.sampler.rate();
        let pts: Vec<(f64, f64, f64)> = self
            .grid
            .iter()
            .filter(|g| g.refs > 0)
            .map(|g| {
                let s = g.lru_size_s as f64;
                let l = self.adjusted(r, self.hist.lru_hits(s), self.hist.total as f64);
                if g.lru.is_some() {
                    // On a subsample: its gain over LRU on the same pages, on top of
                    // the LRU ratio of the whole sample.
                    let gain = (g.hits as f64 - g.lru_hits as f64) / g.refs as f64;
                    return (s / r, (l + gain).clamp(0.0, 1.0), gain);
                }
                let a = self.adjusted(r, g.hits as f64, g.refs as f64);
                (s / r, a, a - l)
            })
            .collect();
        let x = capacity as f64;
        let lru = self.lru_ratio(capacity);
        let (gain, lo, hi) = match pts.iter().position(|p| p.0 >= x) {
            None if pts.is_empty() => (0.0, 0.0, 1.0),
            None => {
                let p = pts[pts.len() - 1];
                (p.2, p.1, 1.0)
            }
            Some(0) => (pts[0].2, 0.0, pts[0].1),
            Some(j) => {
                let (p, q) = (pts[j - 1], pts[j]);
                let t = (x - p.0) / (q.0 - p.0).max(f64::MIN_POSITIVE);
                (p.2 + t * (q.2 - p.2), p.1.min(q.1), p.1.max(q.1))
            }
        };
        let pred = (lru + gain).clamp(lo, hi);
        (pred + self.calibration(x)).clamp(0.0, 1.0)
    }

    /// The real cache is the one full-size data point: the difference between its
    /// measured ratio and its miniature copy's (sampling luck, and the scaling error of
    /// a LIRS cache shrunk by the sampling rate) is added to the predictions, fading out
    /// over four doublings or halvings of the size. Zero when the rate is 1.
    fn calibration(&self, x: f64) -> f64 {
        let Some(g) = self.grid.iter().find(|g| g.size == self.capacity) else {
            return 0.0;
        };
        if g.refs == 0 || self.real_refs == 0 {
            return 0.0;
        }
        let bias = self.real_hits as f64 / self.real_refs as f64
            - self.adjusted(g.sampler.rate(), g.hits as f64, g.refs as f64);
        let w = (1.0 - (x / self.capacity as f64).log2().abs() / 4.0).max(0.0);
        bias * w
    }

    /// The capacity the grid was built for.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn memory_bytes(&self) -> usize {
        self.hist.memory_bytes()
            + self
                .grid
                .iter()
                .map(|g| {
                    g.cache.memory_bytes()
                        + g.race.as_ref().map_or(0, |r| r.lirs.memory_bytes())
                        + g.lru.as_ref().map_or(0, |l| l.memory_bytes())
                })
                .sum::<usize>()
    }
}
