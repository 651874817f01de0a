//! Trace tools for the policy's tests and the `cache_traces` benchmark: the trace format
//! of the LIRS traces, seeded synthetic workloads (Zipf with and without one-time scans,
//! the seed's uniform row reads), and the reference policies the cache is judged
//! against: OPT (Belady, exact), LRU (exact stack distances) and plain LIRS (`lirs.c`
//! settings: 1% HIR part, at least 2 HIR pages, unbounded stack).
//!
//! Counting rule everywhere (the traces' README): the same page twice in a row is a
//! correlated reference, a hit that changes no state.
//!
//! Invariants: all simulators see the same reference stream and the same counting rule.
//! Complexity: OPT O(n log c), LRU O(n log n) for all sizes at once, LIRS O(n).

use super::lirs::{Lirs, Outcome, PageId};
use super::shards::ReuseHist;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Parses a trace: one block number per line; blank lines and `*` markers are skipped.
pub fn parse_trace(text: &str) -> Vec<PageId> {
    text.lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .collect()
}

/// The correlated flags of a stream: `true` where the page repeats the previous one.
pub fn correlated_flags(trace: &[PageId]) -> Vec<bool> {
    let mut prev = None;
    trace
        .iter()
        .map(|&p| {
            let c = prev == Some(p);
            prev = Some(p);
            c
        })
        .collect()
}

/// splitmix64: a seeded PRNG so that synthetic traces are reproducible.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// `refs` references over `keys` keys with Zipf(`alpha`) popularity (ranks mapped to
/// keys by a seeded permutation). With `scans = Some((every, len))`, a one-time scan of
/// `len` never-seen pages is inserted after every `every` Zipf references.
pub fn zipf_trace(
    keys: usize,
    alpha: f64,
    refs: usize,
    seed: u64,
    scans: Option<(usize, usize)>,
) -> Vec<PageId> {
    let mut rng = Rng::new(seed);
    let mut cdf = Vec::with_capacity(keys);
    let mut s = 0.0;
    for r in 1..=keys {
        s += 1.0 / (r as f64).powf(alpha);
        cdf.push(s);
    }
    let mut perm: Vec<PageId> = (0..keys as u64).collect();
    for i in (1..keys).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        perm.swap(i, j);
    }
    let extra = scans.map_or(0, |(every, len)| refs / every.max(1) * len);
    let mut out = Vec::with_capacity(refs + extra);
    let mut next_scan_page = keys as u64 + 1_000_000;
    for n in 0..refs {
        let u = rng.next_f64() * s;
        let r = cdf.partition_point(|&x| x < u).min(keys - 1);
        out.push(perm[r]);
        if let Some((every, len)) = scans
            && (n + 1) % every == 0
        {
            for _ in 0..len {
                out.push(next_scan_page);
                next_scan_page += 1;
            }
        }
    }
    out
}

/// The seed's workload: uniform random primary-key reads of `rows` rows stored
/// `rows_per_page` to a page; each read references the row's page once.
pub fn uniform_rows_trace(rows: u64, rows_per_page: u64, refs: usize, seed: u64) -> Vec<PageId> {
    let mut rng = Rng::new(seed);
    (0..refs).map(|_| rng.below(rows) / rows_per_page).collect()
}

/// Hits of Belady's OPT (demand paging, no bypass) with `cap` frames.
pub fn opt_hits(trace: &[PageId], cap: usize) -> u64 {
    if cap == 0 {
        return 0;
    }
    let n = trace.len();
    // next[i]: index of the next reference to trace[i] (n if none).
    let mut next = vec![n; n];
    let mut last: hashbrown::HashMap<PageId, usize> = hashbrown::HashMap::new();
    for i in (0..n).rev() {
        if let Some(&j) = last.get(&trace[i]) {
            next[i] = j;
        }
        last.insert(trace[i], i);
    }
    // Resident pages with their next use; max-heap with lazy deletion.
    let mut res: hashbrown::HashMap<PageId, usize> = hashbrown::HashMap::new();
    let mut heap: BinaryHeap<(usize, Reverse<PageId>)> = BinaryHeap::new();
    let mut hits = 0;
    for i in 0..n {
        let p = trace[i];
        if let Some(nu) = res.get_mut(&p) {
            hits += 1;
            *nu = next[i];
            heap.push((next[i], Reverse(p)));
            continue;
        }
        if res.len() == cap {
            loop {
                let (nu, Reverse(q)) = heap.pop().expect("heap holds every resident page");
                if res.get(&q) == Some(&nu) {
                    res.remove(&q);
                    break;
                }
            }
        }
        res.insert(p, next[i]);
        heap.push((next[i], Reverse(p)));
    }
    hits
}

/// Exact LRU hits at each of `caps`, from one pass of stack distances.
pub fn lru_hits(trace: &[PageId], caps: &[usize]) -> Vec<u64> {
    let horizon = caps.iter().copied().max().unwrap_or(1).max(1);
    let mut h = ReuseHist::new(horizon, horizon);
    let mut prev = None;
    for &p in trace {
        h.record(p, prev == Some(p));
        prev = Some(p);
    }
    let cum = h.cumulative();
    caps.iter().map(|&c| cum[c.min(horizon)]).collect()
}

/// Hits of plain LIRS with `lirs.c`'s settings (1% HIR, at least 2, unbounded stack).
pub fn lirs_hits(trace: &[PageId], cap: usize) -> u64 {
    let mut l = Lirs::new(cap, Lirs::hot_limit_for(cap, 0.01), usize::MAX);
    run_core(&mut l, trace)
}

/// Feeds `trace` to a core with the counting rule; returns the hits.
pub fn run_core(l: &mut Lirs, trace: &[PageId]) -> u64 {
    let mut prev = None;
    let mut hits = 0;
    for &p in trace {
        if l.access(p, prev == Some(p), &mut |_| true) == Outcome::Hit {
            hits += 1;
        }
        prev = Some(p);
    }
    hits
}

/// Percentage with one decimal, as the README prints it.
pub fn pct(hits: u64, refs: usize) -> f64 {
    if refs == 0 {
        0.0
    } else {
        100.0 * hits as f64 / refs as f64
    }
}
