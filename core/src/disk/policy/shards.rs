//! Spatial sampling (SHARDS, Waldspurger et al., FAST 2015) and an exact LRU
//! reuse-distance (stack-distance) histogram over the sampled references.
//!
//! A page is sampled when `hash(page) < rate * 2^24` on a fixed 64-bit mix, so a sampled
//! page has all its references sampled and distances scale: a distance of `d` sampled
//! pages stands for `d / rate` real pages. An LRU cache of `c` pages hits a reference
//! whose stack distance (distinct pages referenced since the previous reference to the
//! same page) is below `c`, so one histogram gives the LRU hit ratio at every size.
//!
//! Distances are exact within the horizon: a bitmap over access times holds a 1 at the
//! last access time of every tracked page (Bennett & Kruskal); the number of ones after a
//! page's previous time is its distance. The ones are counted by a Fenwick tree over the
//! bitmap's 64-bit words plus one `popcount` (a query touches log2(slots / 64) counters,
//! not log2(slots)), and as all ones lie before the current time, the ones after `t0`
//! are the tracked pages minus the ones up to `t0`: one prefix query per reference. When the time slots (twice the budget)
//! run out they are renumbered, keeping the pages within the horizon; if more than the
//! budget remain, [`ReuseHist::over_budget`] tells the owner to halve the sampling rate
//! ([`ReuseHist::resample`] then drops the pages left out and rescales distances and
//! counts), which is the fixed-size variant of SHARDS.
//!
//! Invariants: every tracked page has exactly one set bit, at its last time (so the set
//! bits number `last.len()` and all lie before `now`); `tree` counts the set bits of each
//! word; tracked pages fit in the slots; distances below the horizon are exact.
//! Complexity: O(log slots) per sampled reference (one probe of the page's last time in
//! the LIRS core's flat [`PageIndex`], one prefix query and one merged walk moving the
//! bit: the -1 and +1 paths stop where they meet), plus an amortised O(1) share of the
//! O(slots) renumbering; memory about 8 bytes per slot plus 32 to 64 per tracked page.

use super::index::PageIndex;
use super::lirs::PageId;

/// The sampling hash (splitmix64 finaliser of the page id with a fixed salt).
#[inline]
pub fn sample_hash(page: PageId) -> u64 {
    let mut z = page ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fixed-rate spatial filter.
#[derive(Clone, Copy, Debug)]
pub struct Sampler {
    threshold: u64,
}

pub const RATE_ONE: u64 = 1 << 24;

impl Sampler {
    pub fn with_rate(rate: f64) -> Sampler {
        let t = (rate.clamp(0.0, 1.0) * RATE_ONE as f64).round() as u64;
        Sampler {
            threshold: t.max(1),
        }
    }
    /// The sampling rate actually used (a multiple of 2^-24).
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / RATE_ONE as f64
    }
    /// The same filter at half the rate (a subset of the pages).
    pub fn halved(&self) -> Sampler {
        Sampler {
            threshold: (self.threshold.min(RATE_ONE) / 2).max(1),
        }
    }
    #[inline]
    pub fn takes(&self, page: PageId) -> bool {
        self.threshold >= RATE_ONE || (sample_hash(page) >> 40) < self.threshold
    }
    /// [`Sampler::takes`] of the page whose [`sample_hash`] is `hash`.
    #[inline]
    pub fn takes_hash(&self, hash: u64) -> bool {
        self.threshold >= RATE_ONE || (hash >> 40) < self.threshold
    }
}

/// LRU stack-distance histogram of the (sampled) references.
pub struct ReuseHist {
    /// Last access time of each tracked page (the flat index of the LIRS core: one
    /// probe, usually one cache line).
    last: PageIndex,
    page_at: Vec<PageId>,
    /// One bit per time slot: set at the last time of each tracked page.
    bits: Vec<u64>,
    /// Fenwick tree (1-based) over the set-bit counts of the words of `bits`.
    tree: Vec<u32>,
    now: u32,
    /// Distances of interest are below `horizon`; older pages are dropped.
    horizon: usize,
    /// Most pages kept by a renumbering before [`ReuseHist::over_budget`] says so.
    budget: usize,
    over: bool,
    /// `hist[d]`: references at stack distance `d` (sampled pages).
    hist: Vec<u64>,
    /// References to pages not tracked (first references, or beyond the horizon).
    pub cold: u64,
    /// Correlated references (hits in every cache, no state change).
    pub correlated: u64,
    pub total: u64,
}

impl ReuseHist {
    /// Exact distances below `horizon`; about `budget` pages tracked (at most twice
    /// that between two renumberings).
    pub fn new(horizon: usize, budget: usize) -> ReuseHist {
        let budget = budget.max(16);
        let slots = (2 * budget).max(1024).next_multiple_of(64);
        let horizon = horizon.max(1);
        ReuseHist {
            last: PageIndex::new(),
            page_at: vec![0; slots],
            bits: vec![0; slots / 64],
            tree: vec![0; slots / 64 + 1],
            now: 0,
            horizon,
            budget,
            over: false,
            hist: vec![0; horizon.min(slots)],
            cold: 0,
            correlated: 0,
            total: 0,
        }
    }

    pub fn horizon(&self) -> usize {
        self.horizon
    }

    /// True when the last renumbering kept more than `budget` pages within the horizon:
    /// the owner should lower the sampling rate.
    pub fn over_budget(&self) -> bool {
        self.over
    }

    /// Adds `delta` to the count of word `w`.
    #[inline]
    fn tree_add(&mut self, w: usize, delta: i32) {
        let mut i = w + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Sets the bit of slot `t` (clear before).
    #[inline]
    fn set(&mut self, t: u32) {
        let w = t as usize / 64;
        debug_assert!(self.bits[w] & 1 << (t % 64) == 0);
        self.bits[w] |= 1 << (t % 64);
        self.tree_add(w, 1);
    }

    /// Clears the bit of slot `t` (set before).
    #[inline]
    fn clear(&mut self, t: u32) {
        let w = t as usize / 64;
        debug_assert!(self.bits[w] & 1 << (t % 64) != 0);
        self.bits[w] &= !(1 << (t % 64));
        self.tree_add(w, -1);
    }

    /// Moves the set bit of slot `t0` to slot `t1` (clear before, `t0 < t1`): the two
    /// counter updates (-1 from `t0`'s word, +1 from `t1`'s) climb the tree on paths
    /// that meet and then coincide; from there on they cancel, so both walks stop where
    /// they meet (the same counters as `clear` then `set`, in fewer steps).
    #[inline]
    fn move_bit(&mut self, t0: u32, t1: u32) {
        let (w0, w1) = (t0 as usize / 64, t1 as usize / 64);
        debug_assert!(self.bits[w0] & 1 << (t0 % 64) != 0);
        debug_assert!(self.bits[w1] & 1 << (t1 % 64) == 0);
        self.bits[w0] &= !(1 << (t0 % 64));
        self.bits[w1] |= 1 << (t1 % 64);
        let (mut i, mut j) = (w0 + 1, w1 + 1);
        let n = self.tree.len();
        while i != j {
            if i < j {
                if i >= n {
                    break;
                }
                self.tree[i] = self.tree[i].wrapping_sub(1);
                i += i & i.wrapping_neg();
            } else {
                if j >= n {
                    break;
                }
                self.tree[j] = self.tree[j].wrapping_add(1);
                j += j & j.wrapping_neg();
            }
        }
        // Left by the first common counter, or with both paths out of the tree (the
        // smaller index is past the end, so the larger one too).
    }

    /// Number of set bits in slots `0..=t`.
    #[inline]
    fn prefix(&self, t: u32) -> u32 {
        let w = t as usize / 64;
        let mut i = w;
        let mut s = 0u32;
        while i > 0 {
            s = s.wrapping_add(self.tree[i]);
            i &= i - 1;
        }
        let below = u64::MAX >> (63 - t % 64);
        s + (self.bits[w] & below).count_ones()
    }

    /// Records one reference; returns its stack distance (`None`: first reference or
    /// beyond the horizon; correlated references return `Some(0)` and change nothing).
    pub fn record(&mut self, page: PageId, correlated: bool) -> Option<usize> {
        // Counters wrap rather than carry the release profile's overflow checks (they
        // are halved long before: `decay`).
        self.total = self.total.wrapping_add(1);
        if correlated && self.last.get(page).is_some() {
            self.correlated += 1;
            return Some(0);
        }
        let now = self.now;
        // One probe: the page's last time is replaced by `now` where it is found.
        let previous = self.last.replace(page, now);
        let d = match previous {
            Some(t0) => {
                // Every set bit is before `now`: those after `t0` are all of them (one
                // per tracked page, this one included) minus those up to `t0`.
                let d = (self.last.len() as u32 - self.prefix(t0)) as usize;
                self.move_bit(t0, now);
                if d < self.hist.len() {
                    self.hist[d] = self.hist[d].wrapping_add(1);
                    Some(d)
                } else {
                    self.cold += 1;
                    None
                }
            }
            None => {
                self.cold += 1;
                self.last.insert(page, now);
                self.set(now);
                None
            }
        };
        self.page_at[now as usize] = page;
        self.now += 1;
        if self.now as usize == self.page_at.len() {
            self.renumber();
        }
        d
    }

    /// The `n` most recently referenced tracked pages, most recent first (fewer if
    /// fewer are tracked). O(time slots scanned).
    pub fn recent(&self, n: usize) -> Vec<PageId> {
        let mut v = Vec::with_capacity(n.min(self.last.len()));
        let mut t = self.now;
        while t > 0 && v.len() < n {
            t -= 1;
            let p = self.page_at[t as usize];
            if self.last.get(p) == Some(t) {
                v.push(p);
            }
        }
        v
    }

    /// Compacts the time axis, keeping the `horizon` most recent pages.
    fn renumber(&mut self) {
        let mut live: Vec<PageId> = Vec::with_capacity(self.last.len());
        for t in 0..self.now {
            let p = self.page_at[t as usize];
            if self.last.get(p) == Some(t) {
                live.push(p);
            }
        }
        // Keep a quarter of the slots free so that renumberings stay rare.
        let keep = self
            .horizon
            .min(self.page_at.len() - self.page_at.len() / 4);
        let drop = live.len().saturating_sub(keep);
        self.over = live.len().min(self.horizon) > self.budget;
        for p in &live[..drop] {
            self.last.remove(*p);
        }
        self.tree.iter_mut().for_each(|x| *x = 0);
        self.bits.iter_mut().for_each(|x| *x = 0);
        for (t, &p) in live[drop..].iter().enumerate() {
            self.page_at[t] = p;
            let kept = self.last.replace(p, t as u32);
            debug_assert!(kept.is_some(), "a live page is tracked");
            self.bits[t / 64] |= 1 << (t % 64);
            // Fenwick build in place: count the word's bits, propagate below.
            self.tree[t / 64 + 1] += 1;
        }
        for i in 1..self.tree.len() {
            let j = i + (i & i.wrapping_neg());
            if j < self.tree.len() {
                self.tree[j] += self.tree[i];
            }
        }
        self.now = (live.len() - drop) as u32;
    }

    /// Keeps only the pages `keep` accepts and rescales distances and counts by
    /// `factor` (the ratio of the new sampling rate to the old one), so that past
    /// references weigh as if they had been sampled at the new rate.
    pub fn resample<F: FnMut(PageId) -> bool>(&mut self, mut keep: F, factor: f64) {
        let gone: Vec<PageId> = self
            .last
            .iter()
            .map(|(p, _)| p)
            .filter(|&p| !keep(p))
            .collect();
        for p in gone {
            self.forget(p);
        }
        self.over = false;
        self.horizon = ((self.horizon as f64 * factor).ceil() as usize).max(1);
        let len = self.hist.len();
        let mut h = vec![0.0f64; len];
        for (d, &n) in self.hist.iter().enumerate() {
            let nd = ((d as f64 * factor) as usize).min(len - 1);
            h[nd] += n as f64 * factor;
        }
        self.hist = h.into_iter().map(|x| x.round() as u64).collect();
        let scale = |x: u64| (x as f64 * factor).round() as u64;
        self.cold = scale(self.cold);
        self.correlated = scale(self.correlated);
        self.total = self.hist.iter().sum::<u64>() + self.cold + self.correlated;
    }

    /// Forgets a page (it will count as a first reference next time).
    pub fn forget(&mut self, page: PageId) {
        if let Some(t) = self.last.remove(page) {
            self.clear(t);
        }
    }

    /// Hits an LRU cache of `size` (sampled) pages would have had, correlated ones
    /// included; `size` may be fractional (linear interpolation between sizes).
    pub fn lru_hits(&self, size: f64) -> f64 {
        let whole = (size.max(0.0).floor() as usize).min(self.hist.len());
        let mut h: u64 = self.hist[..whole].iter().sum();
        let mut frac = 0.0;
        if whole < self.hist.len() && size > whole as f64 {
            frac = (size - whole as f64) * self.hist[whole] as f64;
        }
        h += self.correlated;
        h as f64 + frac
    }

    /// LRU hit ratio (0..1) at `size` sampled pages.
    pub fn lru_ratio(&self, size: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        self.lru_hits(size) / self.total as f64
    }

    /// Cumulative hit counts for all sizes `0..=horizon` (index = size).
    pub fn cumulative(&self) -> Vec<u64> {
        let mut v = Vec::with_capacity(self.hist.len() + 1);
        let mut s = self.correlated;
        v.push(s);
        for &x in &self.hist {
            s += x;
            v.push(s);
        }
        v
    }

    /// Halves every counter (ageing, so that the histogram follows a changing load).
    pub fn decay(&mut self) {
        self.hist.iter_mut().for_each(|x| *x /= 2);
        self.cold /= 2;
        self.correlated /= 2;
        self.total = self.hist.iter().sum::<u64>() + self.cold + self.correlated;
    }

    pub fn tracked(&self) -> usize {
        self.last.len()
    }

    pub fn memory_bytes(&self) -> usize {
        self.last.memory_bytes()
            + self.page_at.capacity() * 8
            + self.bits.capacity() * 8
            + self.tree.capacity() * 4
            + self.hist.capacity() * 8
    }
}
