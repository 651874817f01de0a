//! Replacement policy of the DiskPageBufferMemory page cache (NDB's PGMAN), with a
//! hit-ratio advisor. Independent of I/O: the caller owns the page frames; the policy
//! says hit or miss and names the victim.
//!
//! - [`lirs`]: the LIRS core as in PGMAN — hot stack, resident cold queue, non-resident
//!   entries bounded to `DiskPageBufferEntries x capacity`, correlated references that
//!   do not promote, victims restricted to evictable pages — with a hot limit that can
//!   move at run time (`0` is exactly LRU); [`index`] is its page-id hash index.
//! - [`tune`]: the race that picks the hot limit: an LRU expert against a LIRS expert
//!   (miniature simulations on a sample), switching on a significant lead. It is LRU on
//!   `sprite` and `zigzag` (where plain LIRS loses) and within 1-4% of plain LIRS on
//!   loops, scans and `cs`.
//! - [`advisor`]: SHARDS sampling, an exact LRU stack-distance histogram and miniature
//!   copies of this very policy at a grid of sizes: `predict_hit_ratio(size)`. Its 1x
//!   copy also hosts the race.
//! - [`shards`]: the sampler and the histogram. [`sim`]: traces, OPT, LRU, plain LIRS.
//!
//! Invariants: `resident <= capacity` except when no evictable victim exists (the
//! excess is reported by [`PolicyStats::over_capacity`] and reclaimed by
//! [`PageCachePolicy::evict_excess`]); `nonresident <= entries_per_page * capacity`;
//! the real cache's hot limit is the one of its current [`Mode`] (reached at most
//! [`advisor::SETTLE_BUDGET`] moves per access after a change). [`PageCachePolicy::check`]
//! verifies all of them.
//!
//! Complexity: O(1) per access; no allocation per access once the structures reached
//! their bounded size (the histogram renumbers its time axis every few thousand sampled
//! references). A sampled access (rate at most `512 / capacity`) adds O(log) for the
//! histogram and one or two LIRS steps per grid size up to 1x (fewer, at lower rates,
//! above). Design notes and measurements:
//! `docs/page-cache-policy.md`.

pub mod advisor;
pub mod index;
pub mod lirs;
pub mod shards;
pub mod sim;
pub mod tune;

#[cfg(test)]
mod tests;

pub use advisor::AdvisorConfig;
use advisor::{Advisor, ModelConfig, SETTLE_BUDGET};
pub use lirs::PageId;
use lirs::{Lirs, Outcome};
use tune::Tuner;
pub use tune::{Mode, RaceConfig};

/// NDB's default `DiskPageBufferEntries`: page entries per cache page.
pub const DEFAULT_ENTRIES_PER_PAGE: usize = 10;

/// A page id from a file number and a page number.
pub fn page_id(file_no: u32, page_no: u32) -> PageId {
    (file_no as u64) << 32 | page_no as u64
}

/// Outcome of [`PageCachePolicy::access`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The page is resident.
    Hit,
    /// The caller loads the page; if the cache was full, `evict` is the victim to drop
    /// first (`None` with a full cache: no evictable page was found, the cache is now
    /// over capacity by one).
    Miss { evict: Option<PageId> },
}

/// Policy parameters.
#[derive(Clone, Debug)]
pub struct PolicyConfig {
    /// Cache size in pages (DiskPageBufferMemory / 32 KB).
    pub capacity: usize,
    /// DiskPageBufferEntries: non-resident entries are bounded by this times capacity.
    pub entries_per_page: usize,
    /// HIR (cold) share in LIRS mode; at least 2 pages (lirs.c).
    pub hir_fraction: f64,
    /// Race LRU against LIRS (`false`: plain LIRS, as NDB).
    pub adaptive: bool,
    pub race: RaceConfig,
    /// Keep the advisor (reuse histogram and miniature caches).
    pub advisor_enabled: bool,
    pub advisor: AdvisorConfig,
}

impl PolicyConfig {
    /// The adaptive policy with the advisor, NDB's defaults otherwise.
    pub fn new(capacity: usize) -> PolicyConfig {
        PolicyConfig {
            capacity,
            entries_per_page: DEFAULT_ENTRIES_PER_PAGE,
            hir_fraction: 0.01,
            adaptive: true,
            race: RaceConfig::default(),
            advisor_enabled: true,
            advisor: AdvisorConfig::default(),
        }
    }

    /// Plain LIRS as in PGMAN (1% HIR), still with the advisor.
    pub fn plain_lirs(capacity: usize) -> PolicyConfig {
        PolicyConfig {
            adaptive: false,
            ..PolicyConfig::new(capacity)
        }
    }

    fn model(&self) -> ModelConfig {
        ModelConfig {
            hir_fraction: self.hir_fraction,
            entries_per_page: self.entries_per_page,
            race: self.adaptive.then(|| self.race.clone()),
        }
    }
}

/// Counters and sizes, for `ndbinfo.diskpagebuffer` and reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyStats {
    pub capacity: usize,
    pub resident: usize,
    pub hot: usize,
    pub hot_limit: usize,
    pub nonresident: usize,
    pub nonresident_limit: usize,
    /// Every reference, hits and misses, correlated included.
    pub requests: u64,
    pub hits: u64,
    /// Hits of correlated references (also counted in `hits`).
    pub correlated_hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// Misses on a full cache that found no evictable victim.
    pub no_victim: u64,
    pub over_capacity: usize,
    pub mode: Mode,
    pub mode_switches: u64,
    pub tuner_sample_rate: f64,
    pub advisor_sample_rate: f64,
    /// Metadata bytes of the cache, of the tuner and of the advisor.
    pub memory_bytes: usize,
    pub tuner_memory_bytes: usize,
    pub advisor_memory_bytes: usize,
}

/// The page cache's replacement policy.
pub struct PageCachePolicy {
    cfg: PolicyConfig,
    model: ModelConfig,
    real: Lirs,
    tuner: Option<Tuner>,
    mode: Mode,
    /// Mode switches before the last resize.
    switches_before: u64,
    advisor: Option<Advisor>,
    stats: PolicyStats,
}

impl PageCachePolicy {
    /// The default policy for `capacity` pages.
    pub fn new(capacity: usize) -> PageCachePolicy {
        PageCachePolicy::with_config(PolicyConfig::new(capacity))
    }

    /// A policy with `cfg` (a capacity of 0 is taken as 1).
    pub fn with_config(mut cfg: PolicyConfig) -> PageCachePolicy {
        cfg.capacity = cfg.capacity.max(1);
        let model = cfg.model();
        let mode = model.start_mode();
        let c = cfg.capacity;
        let real = Lirs::new(
            c,
            model.hot_limit(c, mode),
            c.saturating_mul(cfg.entries_per_page),
        );
        let advisor = cfg
            .advisor_enabled
            .then(|| Advisor::new(&cfg.advisor, &model, c));
        let tuner = Self::own_tuner(&cfg, &model, advisor.as_ref(), mode);
        PageCachePolicy {
            cfg,
            model,
            real,
            tuner,
            mode,
            switches_before: 0,
            advisor,
            stats: PolicyStats::default(),
        }
    }

    /// The race runs in the advisor's 1x miniature cache when there is one (it is a
    /// copy of this cache: same race, same sample), else in a tuner of its own.
    fn own_tuner(
        cfg: &PolicyConfig,
        model: &ModelConfig,
        advisor: Option<&Advisor>,
        mode: Mode,
    ) -> Option<Tuner> {
        let rc = model.race.as_ref()?;
        if advisor.is_some_and(|a| a.mode().is_some()) {
            return None;
        }
        Some(Tuner::new(
            rc,
            cfg.capacity,
            cfg.hir_fraction,
            cfg.entries_per_page,
            mode,
        ))
    }

    /// The advisor's 1x copy disappeared (its sampled size fell below the minimum
    /// after rate halvings, only possible with a custom grid): race on our own.
    #[cold]
    fn lost_race(&mut self) {
        self.switches_before += self.advisor.as_ref().map_or(0, |a| a.switches());
        self.tuner = Self::own_tuner(&self.cfg, &self.model, None, self.mode);
    }

    fn switch_to(&mut self, m: Mode) {
        self.mode = m;
        let limit = self.model.hot_limit(self.cfg.capacity, m);
        self.real.set_hot_limit(limit, SETTLE_BUDGET);
    }

    /// One page request. `correlated`: a re-reference within the same operation (NDB's
    /// `CORR_REQ`, e.g. the commit-time access of a PK operation, a scan re-touching
    /// its page): a hit changes no state, a miss loads the page cold.
    /// `is_evictable(victim)` must say whether a resident page may be dropped now
    /// (clean, mapped, no requests); non-evictable pages are skipped.
    #[inline]
    pub fn access<F: FnMut(PageId) -> bool>(
        &mut self,
        page: PageId,
        correlated: bool,
        mut is_evictable: F,
    ) -> Access {
        if let Some(t) = &mut self.tuner
            && let Some(m) = t.observe(page, correlated)
        {
            self.switch_to(m);
        }
        let out = self.real.access(page, correlated, &mut is_evictable);
        let hit = out == Outcome::Hit;
        self.stats.requests += 1;
        if let Some(a) = &mut self.advisor {
            a.count_real(hit);
            let h = shards::sample_hash(page);
            if a.sampler.takes_hash(h) {
                a.observe_hashed(&self.model, page, h, correlated);
                if self.tuner.is_none() {
                    match a.mode() {
                        Some(m) if m != self.mode => self.switch_to(m),
                        Some(_) => {}
                        None => self.lost_race(),
                    }
                }
            }
        }
        self.real.settle_step(SETTLE_BUDGET);
        match out {
            Outcome::Hit => {
                self.stats.hits += 1;
                self.stats.correlated_hits += correlated as u64;
                Access::Hit
            }
            Outcome::Miss { evicted } => {
                self.stats.misses += 1;
                match evicted {
                    Some(_) => self.stats.evictions += 1,
                    None if self.real.resident() > self.cfg.capacity => self.stats.no_victim += 1,
                    None => {}
                }
                Access::Miss { evict: evicted }
            }
        }
    }

    /// [`PageCachePolicy::access`] with every page evictable.
    #[inline]
    pub fn access_any(&mut self, page: PageId, correlated: bool) -> Access {
        self.access(page, correlated, |_| true)
    }

    /// Forgets a page (its extent was freed, its file dropped). Returns whether it was
    /// resident (the caller then frees its frame).
    pub fn remove(&mut self, page: PageId) -> bool {
        self.real.remove(page)
    }

    /// Changes the capacity without a restart. Returns the pages to evict when
    /// shrinking (only evictable ones; any excess left is reclaimed by later misses and
    /// [`PageCachePolicy::evict_excess`]). The advisor restarts at the new size.
    pub fn resize<F: FnMut(PageId) -> bool>(
        &mut self,
        new_capacity: usize,
        mut is_evictable: F,
    ) -> Vec<PageId> {
        let new_capacity = new_capacity.max(1);
        self.cfg.capacity = new_capacity;
        let v = self.real.resize(
            new_capacity,
            self.model.hot_limit(new_capacity, self.mode),
            new_capacity.saturating_mul(self.cfg.entries_per_page),
            &mut is_evictable,
        );
        self.stats.evictions += v.len() as u64;
        self.switches_before += self.switches_now();
        if self.advisor.is_some() {
            let mut a = Advisor::new(&self.cfg.advisor, &self.model, new_capacity);
            a.set_mode(&self.model, self.mode);
            self.advisor = Some(a);
        }
        self.tuner = Self::own_tuner(&self.cfg, &self.model, self.advisor.as_ref(), self.mode);
        v
    }

    /// Evicts pages while the cache is over capacity (after misses that found no
    /// evictable victim, or a shrink). Returns the pages to drop.
    pub fn evict_excess<F: FnMut(PageId) -> bool>(&mut self, mut is_evictable: F) -> Vec<PageId> {
        let v = self.real.evict_excess(&mut is_evictable);
        self.stats.evictions += v.len() as u64;
        v
    }

    pub fn contains(&self, page: PageId) -> bool {
        self.real.is_resident(page)
    }
    /// Whether `page` is hot (LIR).
    pub fn is_hot(&self, page: PageId) -> bool {
        self.real.is_hot(page)
    }
    pub fn capacity(&self) -> usize {
        self.cfg.capacity
    }
    /// Resident pages.
    pub fn len(&self) -> usize {
        self.real.resident()
    }
    pub fn is_empty(&self) -> bool {
        self.real.resident() == 0
    }
    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn config(&self) -> &PolicyConfig {
        &self.cfg
    }
    /// Resident pages (hot ones first).
    pub fn resident_pages(&self) -> Vec<PageId> {
        self.real.resident_pages()
    }

    pub fn stats(&self) -> PolicyStats {
        PolicyStats {
            capacity: self.cfg.capacity,
            resident: self.real.resident(),
            hot: self.real.hot(),
            hot_limit: self.real.hot_limit(),
            nonresident: self.real.nonresident(),
            nonresident_limit: self.real.nonres_limit(),
            over_capacity: self.real.resident().saturating_sub(self.cfg.capacity),
            mode: self.mode,
            mode_switches: self.switches_before + self.switches_now(),
            tuner_sample_rate: match (&self.tuner, &self.advisor) {
                (Some(t), _) => t.sampler.rate(),
                (None, Some(a)) if self.model.race.is_some() => a.sampler.rate(),
                _ => 0.0,
            },
            advisor_sample_rate: self.advisor.as_ref().map_or(0.0, |a| a.sampler.rate()),
            memory_bytes: self.real.memory_bytes(),
            tuner_memory_bytes: self.tuner.as_ref().map_or(0, |t| t.memory_bytes()),
            advisor_memory_bytes: self.advisor.as_ref().map_or(0, |a| a.memory_bytes()),
            ..self.stats.clone()
        }
    }

    fn switches_now(&self) -> u64 {
        match (&self.tuner, &self.advisor) {
            (Some(t), _) => t.race.switches,
            (None, Some(a)) => a.switches(),
            _ => 0,
        }
    }

    /// Hit ratio (0..1) measured over the advisor's window (since the start without
    /// an advisor).
    pub fn measured_hit_ratio(&self) -> f64 {
        let (h, n) = match &self.advisor {
            Some(a) => (a.real_hits, a.real_refs),
            None => (self.stats.hits, self.stats.requests),
        };
        if n == 0 { 0.0 } else { h as f64 / n as f64 }
    }

    /// Predicted hit ratio (0..1) of this cache with `capacity_pages` pages, on the
    /// references seen (over the advisor's window). 0 without an advisor.
    pub fn predict_hit_ratio(&self, capacity_pages: usize) -> f64 {
        self.advisor
            .as_ref()
            .map_or(0.0, |a| a.predict(capacity_pages))
    }

    /// LRU's hit ratio (0..1) at `capacity_pages`, from the stack-distance histogram.
    pub fn predict_lru_hit_ratio(&self, capacity_pages: usize) -> f64 {
        self.advisor
            .as_ref()
            .map_or(0.0, |a| a.lru_ratio(capacity_pages))
    }

    /// `(capacity, predicted hit ratio in percent)` for each capacity asked.
    pub fn advice(&self, capacities: &[usize]) -> Vec<(usize, f64)> {
        capacities
            .iter()
            .map(|&c| (c, 100.0 * self.predict_hit_ratio(c)))
            .collect()
    }

    /// The advisor's internals (grid of miniature caches, histogram).
    pub fn advisor(&self) -> Option<&Advisor> {
        self.advisor.as_ref()
    }

    /// Verifies every invariant of the cache and its miniature copies (O(entries)).
    pub fn check(&self) {
        self.real.check();
        assert!(
            self.real.nonresident() <= self.cfg.entries_per_page * self.cfg.capacity,
            "non-resident entries above DiskPageBufferEntries x capacity"
        );
        assert_eq!(
            self.real.hot_limit(),
            self.model.hot_limit(self.cfg.capacity, self.mode),
            "hot limit does not match the mode"
        );
        assert!(self.real.hot() <= self.real.resident());
        if let Some(t) = &self.tuner {
            t.lru.check();
            t.race.lirs.check();
            assert_eq!(t.race.mode, self.mode);
        } else if let Some(m) = self.advisor.as_ref().and_then(|a| a.mode()) {
            assert_eq!(m, self.mode, "the advisor's 1x copy decides the mode");
        }
        for g in self.advisor.iter().flat_map(|a| &a.grid) {
            g.cache.check();
            if let Some(r) = &g.race {
                r.lirs.check();
            }
        }
    }
}
