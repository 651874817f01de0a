//! Tests of the page-cache policy: reference numbers on the `cs` trace (the trace files
//! are read from `../shared/data/lirs-traces` beside the repository, or from
//! `$LIRS_TRACES_DIR`), bounds, evictability, resize, remove, correlated references,
//! invariants under random operations, and the advisor's accuracy.

use super::index::PageIndex;
use super::lirs::Lirs;
use super::shards::ReuseHist;
use super::sim::{self, Rng};
use super::*;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

fn traces_dir() -> PathBuf {
    match std::env::var_os("LIRS_TRACES_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/lirs-traces"),
    }
}

fn load_trace(name: &str) -> Vec<PageId> {
    let path = traces_dir().join(format!("{name}.trace.gz"));
    let out = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(&path)
        .output()
        .expect("gzip runs");
    assert!(out.status.success(), "cannot read {}", path.display());
    sim::parse_trace(&String::from_utf8(out.stdout).expect("trace is text"))
}

/// Hits of a policy on a trace with the counting rule (same page twice in a row is a
/// correlated reference).
fn run(p: &mut PageCachePolicy, trace: &[PageId]) -> u64 {
    let mut prev = None;
    let mut hits = 0;
    for &x in trace {
        if p.access_any(x, prev == Some(x)) == Access::Hit {
            hits += 1;
        }
        prev = Some(x);
    }
    hits
}

fn pct1(hits: u64, n: usize) -> f64 {
    (sim::pct(hits, n) * 10.0).round() / 10.0
}

fn no_advisor(capacity: usize) -> PolicyConfig {
    PolicyConfig {
        advisor_enabled: false,
        ..PolicyConfig::new(capacity)
    }
}

#[test]
fn plain_lirs_opt_and_lru_match_the_reference_numbers_on_cs() {
    let t = load_trace("cs");
    assert_eq!(t.len(), 6781);
    let lirs: Vec<f64> = [70, 140, 281, 563]
        .iter()
        .map(|&c| pct1(sim::lirs_hits(&t, c), t.len()))
        .collect();
    assert_eq!(lirs, vec![5.3, 9.5, 17.7, 34.2]);
    // The same numbers through the public policy in plain-LIRS mode, with a history
    // bound large enough to be the unbounded stack of lirs.c.
    for (c, want) in [(70, 5.3), (281, 17.7)] {
        let mut p = PageCachePolicy::with_config(PolicyConfig {
            advisor_enabled: false,
            entries_per_page: 100,
            ..PolicyConfig::plain_lirs(c)
        });
        assert_eq!(pct1(run(&mut p, &t), t.len()), want);
        p.check();
    }
    assert_eq!(pct1(sim::opt_hits(&t, 281), t.len()), 18.4);
    assert_eq!(pct1(sim::opt_hits(&t, 563), t.len()), 35.0);
    let lru = sim::lru_hits(&t, &[281, 563]);
    assert_eq!(pct1(lru[0], t.len()), 1.8);
    assert_eq!(pct1(lru[1], t.len()), 1.8);
}

#[test]
fn adaptive_policy_is_near_opt_on_cs_and_at_least_lru() {
    let t = load_trace("cs");
    for c in [281, 563] {
        let mut p = PageCachePolicy::new(c);
        let ours = run(&mut p, &t);
        p.check();
        let opt = sim::opt_hits(&t, c);
        let lru = sim::lru_hits(&t, &[c])[0];
        assert!(
            ours as f64 >= 0.95 * opt as f64,
            "c={c}: {ours} < 0.95 x {opt}"
        );
        assert!(ours >= lru);
        assert_eq!(p.mode(), Mode::Lirs);
    }
}

/// Forward then backward scans over `n` blocks, `turns` times.
fn zigzag(n: u64, turns: usize) -> Vec<PageId> {
    let mut v: Vec<PageId> = (0..n).collect();
    for k in 0..turns {
        if k % 2 == 0 {
            v.extend((0..n - 1).rev());
        } else {
            v.extend(1..n);
        }
    }
    v
}

#[test]
fn adaptive_policy_matches_lru_on_zigzag_and_lirs_on_loops() {
    let z = zigzag(501, 12);
    let lru = sim::lru_hits(&z, &[100])[0];
    let mut p = PageCachePolicy::with_config(no_advisor(100));
    let ours = run(&mut p, &z);
    assert!(ours >= lru, "zigzag: {ours} < LRU {lru}");
    assert!(
        sim::lirs_hits(&z, 100) < lru / 4,
        "plain LIRS collapses on zigzag"
    );

    let looped: Vec<PageId> = (0..30).flat_map(|_| 0..501u64).collect();
    let opt = sim::opt_hits(&looped, 100);
    let mut p = PageCachePolicy::with_config(no_advisor(100));
    let ours = run(&mut p, &looped);
    assert!(
        ours as f64 >= 0.95 * opt as f64,
        "loop: {ours} vs OPT {opt}"
    );
    assert_eq!(sim::lru_hits(&looped, &[100])[0], 0);
    p.check();
}

#[test]
fn adaptive_policy_at_least_lru_on_zipf_with_scans() {
    let t = sim::zipf_trace(5_000, 0.99, 60_000, 3, Some((10_000, 3_000)));
    for c in [50, 250, 1000] {
        let lru = sim::lru_hits(&t, &[c])[0];
        let mut p = PageCachePolicy::with_config(no_advisor(c));
        let ours = run(&mut p, &t);
        assert!(ours >= lru, "c={c}: {ours} < LRU {lru}");
    }
}

#[test]
fn nonresident_entries_stay_bounded() {
    for adaptive in [true, false] {
        let c = 20;
        let mut cfg = no_advisor(c);
        cfg.adaptive = adaptive;
        cfg.entries_per_page = 3;
        let mut p = PageCachePolicy::with_config(cfg);
        // A loop much longer than the stack bound, then a one-time scan.
        let refs = (0..20).flat_map(|_| 0..400u64).chain(10_000..15_000);
        for (i, x) in refs.enumerate() {
            p.access_any(x, false);
            let st = p.stats();
            assert!(
                st.nonresident <= 3 * c,
                "{} non-resident entries",
                st.nonresident
            );
            assert!(st.resident <= c);
            if i % 997 == 0 {
                p.check();
            }
        }
        assert_eq!(p.stats().nonresident_limit, 60);
        p.check();
    }
}

#[test]
fn non_evictable_pages_are_never_victims() {
    let c = 64;
    let mut p = PageCachePolicy::new(c);
    let dirty = |x: PageId| x.is_multiple_of(7);
    let mut mirror: HashSet<PageId> = HashSet::new();
    let mut rng = Rng::new(11);
    for i in 0..30_000 {
        // Mostly a hot set, with bursts of a scan.
        let x = if i % 5 == 0 {
            100_000 + i as u64
        } else {
            rng.below(400)
        };
        match p.access(x, false, |v| !dirty(v)) {
            Access::Hit => assert!(mirror.contains(&x)),
            Access::Miss { evict } => {
                assert!(!mirror.contains(&x));
                if let Some(v) = evict {
                    assert!(!dirty(v), "dirty page {v} chosen as victim");
                    assert!(mirror.remove(&v));
                }
                mirror.insert(x);
            }
        }
        assert_eq!(mirror.len(), p.len());
        if i % 1000 == 0 {
            p.check();
        }
    }
    let mut resident = p.resident_pages();
    resident.sort_unstable();
    let mut want: Vec<PageId> = mirror.into_iter().collect();
    want.sort_unstable();
    assert_eq!(resident, want);
}

#[test]
fn without_evictable_victim_the_cache_goes_over_capacity_then_reclaims() {
    let mut p = PageCachePolicy::with_config(no_advisor(10));
    for x in 0..10 {
        p.access_any(x, false);
    }
    assert_eq!(p.access(99, false, |_| false), Access::Miss { evict: None });
    let st = p.stats();
    assert_eq!((st.resident, st.over_capacity, st.no_victim), (11, 1, 1));
    p.check();
    // The next miss with evictable pages evicts one: still one over.
    assert!(matches!(
        p.access_any(100, false),
        Access::Miss { evict: Some(_) }
    ));
    assert_eq!(p.len(), 11);
    let v = p.evict_excess(|x| x != 100);
    assert_eq!(v.len(), 1);
    assert_eq!(p.len(), 10);
    assert!(p.contains(100));
    p.check();
}

#[test]
fn resize_shrinks_and_grows_without_restart() {
    let mut p = PageCachePolicy::new(100);
    let mut rng = Rng::new(5);
    for _ in 0..5_000 {
        p.access_any(rng.below(300), false);
    }
    assert_eq!(p.len(), 100);
    let before: HashSet<PageId> = p.resident_pages().into_iter().collect();
    let evicted = p.resize(40, |_| true);
    assert_eq!(evicted.len(), 60);
    assert!(evicted.iter().all(|v| before.contains(v)));
    assert_eq!(p.len(), 40);
    assert_eq!(p.capacity(), 40);
    p.check();
    // Shrinking with half the pages pinned evicts only the others.
    let evicted = p.resize(10, |x| x % 2 == 0);
    assert!(evicted.iter().all(|x| x % 2 == 0));
    assert_eq!(p.len() - p.stats().over_capacity, 10.min(p.len()));
    p.check();
    let _ = p.evict_excess(|_| true);
    assert!(p.len() <= 10);
    // Growing keeps the resident pages and fills up.
    let kept = p.resident_pages();
    assert!(p.resize(200, |_| true).is_empty());
    assert!(kept.iter().all(|&x| p.contains(x)));
    for _ in 0..5_000 {
        p.access_any(rng.below(300), false);
    }
    assert_eq!(p.len(), 200);
    p.check();
    assert!(p.stats().nonresident <= 200 * DEFAULT_ENTRIES_PER_PAGE);
    assert!(p.predict_hit_ratio(200) > 0.5);
}

#[test]
fn remove_forgets_resident_and_history_pages() {
    let mut p = PageCachePolicy::with_config(no_advisor(8));
    for x in 0..30 {
        p.access_any(x, false);
    }
    assert!(p.contains(29));
    assert!(p.remove(29));
    assert!(!p.contains(29));
    assert!(!p.remove(29));
    assert!(!p.remove(12_345));
    // Page 0 is no longer resident (LRU start): its history entry goes quietly.
    assert!(!p.contains(0));
    assert!(!p.remove(0));
    assert_eq!(p.len(), 7);
    p.check();
    assert_eq!(p.access_any(29, false), Access::Miss { evict: None });
    assert_eq!(p.len(), 8);
    p.check();
}

#[test]
fn correlated_references_do_not_promote() {
    // Plain LIRS, 10 pages: 8 hot, 2 cold.
    let mut p = PageCachePolicy::with_config(PolicyConfig {
        advisor_enabled: false,
        ..PolicyConfig::plain_lirs(10)
    });
    for x in 0..8 {
        p.access_any(x, false);
    }
    assert!((0..8).all(|x| p.is_hot(x)));
    p.access_any(100, false);
    assert!(p.contains(100) && !p.is_hot(100));
    p.access_any(5, false);
    // Second touch of the same operation: a hit, nothing changes.
    assert_eq!(p.access_any(100, true), Access::Hit);
    assert!(!p.is_hot(100));
    assert_eq!(p.stats().correlated_hits, 1);
    // A real re-reference of a cold page on the stack promotes it.
    assert_eq!(p.access_any(100, false), Access::Hit);
    assert!(p.is_hot(100));
    p.check();
    // Through the core: a correlated miss loads the page cold.
    let mut l = Lirs::new(4, 2, 10);
    for x in 0..4 {
        l.access(x, false, &mut |_| true);
    }
    l.access(50, false, &mut |_| true);
    l.access(51, false, &mut |_| true);
    l.access(50, true, &mut |_| true);
    assert!(!l.is_hot(50));
    l.check();
}

#[test]
fn random_operations_keep_every_invariant() {
    let mut rng = Rng::new(77);
    for round in 0..4 {
        let mut cfg = PolicyConfig::new(30 + 20 * round);
        cfg.adaptive = round % 2 == 0;
        cfg.entries_per_page = 1 + round;
        cfg.advisor.sample_pages = 256;
        let mut p = PageCachePolicy::with_config(cfg);
        for i in 0..20_000u64 {
            let r = rng.below(1000);
            let x = if r < 600 {
                rng.below(60)
            } else if r < 900 {
                rng.below(2_000)
            } else {
                1_000_000 + i
            };
            match rng.below(100) {
                0 => {
                    p.remove(x);
                }
                1 if i % 50 == 0 => {
                    let c = 10 + rng.below(120) as usize;
                    p.resize(c, |v| v % 3 != 0);
                }
                2 => {
                    p.evict_excess(|_| true);
                }
                _ => {
                    let corr = rng.below(10) == 0;
                    p.access(x, corr, |v| v % 5 != 0);
                }
            }
            if i % 500 == 0 {
                p.check();
            }
        }
        p.check();
    }
}

/// Hit ratio (%) of a cache of `c` pages on `trace`.
fn measured(c: usize, trace: &[PageId]) -> f64 {
    let mut p = PageCachePolicy::new(c);
    sim::pct(run(&mut p, trace), trace.len())
}

#[test]
fn advisor_predicts_uniform_load_within_two_points() {
    // The seed's load in small: uniform references over 20,000 pages, cache of 2,000.
    let t = sim::uniform_rows_trace(20_000 * 30, 30, 300_000, 9);
    let mut p = PageCachePolicy::new(2_000);
    let here = sim::pct(run(&mut p, &t), t.len());
    assert!(p.stats().advisor_sample_rate < 1.0, "sampled");
    assert!((100.0 * p.predict_hit_ratio(2_000) - here).abs() < 1.0);
    for c in [1_000, 4_000, 8_000, 16_000] {
        let want = measured(c, &t);
        let got = 100.0 * p.predict_hit_ratio(c);
        assert!(
            (got - want).abs() <= 2.0,
            "c={c}: predicted {got:.2} measured {want:.2}"
        );
    }
    let adv = p.advice(&[4_000]);
    assert_eq!(adv.len(), 1);
    assert!((adv[0].1 - 100.0 * p.predict_hit_ratio(4_000)).abs() < 1e-9);
    p.check();
}

#[test]
fn advisor_survives_rate_halvings_and_tracks_a_loop() {
    // A loop larger than the cache: LRU gets nothing, LIRS about c / n.
    let t: Vec<PageId> = (0..40).flat_map(|_| 0..1_500u64).collect();
    let mut cfg = PolicyConfig::new(500);
    cfg.advisor.sample_pages = 400;
    let mut p = PageCachePolicy::with_config(cfg);
    run(&mut p, &t);
    p.check();
    assert!(p.stats().advisor_sample_rate < 0.5, "rate was halved");
    assert!(p.predict_lru_hit_ratio(1_000) < 0.01);
    for c in [250, 1_000, 2_000] {
        let want = measured(c, &t);
        let got = 100.0 * p.predict_hit_ratio(c);
        assert!(
            (got - want).abs() <= 3.0,
            "c={c}: predicted {got:.2} measured {want:.2}"
        );
    }
}

#[test]
fn lru_mode_is_exact_lru() {
    let t = sim::zipf_trace(2_000, 0.9, 30_000, 1, Some((5_000, 500)));
    for c in [10, 100, 700] {
        let mut l = Lirs::new(c, 0, 5 * c);
        let hits = sim::run_core(&mut l, &t);
        assert_eq!(hits, sim::lru_hits(&t, &[c])[0], "c={c}");
        l.check();
    }
}

#[test]
fn page_index_matches_a_hash_map() {
    let mut idx = PageIndex::new();
    let mut map: HashMap<PageId, u32> = HashMap::new();
    let mut rng = Rng::new(3);
    for i in 0..50_000u32 {
        let k = rng.below(3_000) << 20 | rng.below(4);
        match map.remove(&k) {
            Some(v) => assert_eq!(idx.remove(k), Some(v)),
            None => {
                idx.insert(k, i);
                map.insert(k, i);
            }
        }
        if i % 5_000 == 0 {
            idx.check();
        }
    }
    idx.check();
    assert_eq!(idx.len(), map.len());
    for (&k, &v) in &map {
        assert_eq!(idx.get(k), Some(v));
    }
}

#[test]
fn reuse_distances_match_a_naive_stack() {
    let t = sim::zipf_trace(300, 0.7, 20_000, 8, None);
    // Small budget: the time axis is renumbered many times.
    let mut h = ReuseHist::new(400, 400);
    let mut stack: Vec<PageId> = Vec::new();
    for &x in &t {
        let want = stack.iter().rev().position(|&y| y == x);
        assert_eq!(h.record(x, false), want);
        if let Some(d) = want {
            stack.remove(stack.len() - 1 - d);
        }
        stack.push(x);
    }
}

#[test]
fn advisor_copies_are_exact_at_full_rate_across_a_switch() {
    // cs at 281 pages: the rate is 1, every copy is an exact simulation; the copies at
    // 1/4 and 1/2 start in LRU mode without stepping their own structure, switch to
    // LIRS (rebuilt from the histogram) and must still match a real cache of that size.
    let t = load_trace("cs");
    let mut p = PageCachePolicy::new(281);
    run(&mut p, &t);
    assert_eq!(p.stats().advisor_sample_rate, 1.0);
    for c in [70, 140] {
        let want = measured(c, &t);
        let got = 100.0 * p.predict_hit_ratio(c);
        assert!(
            (got - want).abs() < 0.1,
            "c={c}: predicted {got:.2} measured {want:.2}"
        );
        let mut real = PageCachePolicy::new(c);
        run(&mut real, &t);
        assert_eq!(real.mode(), Mode::Lirs, "c={c}: the copy had to switch");
    }
    p.check();
}

#[test]
fn recent_pages_match_a_naive_stack() {
    let t = sim::zipf_trace(300, 0.7, 5_000, 4, None);
    let mut h = ReuseHist::new(400, 400);
    let mut stack: Vec<PageId> = Vec::new();
    for (k, &x) in t.iter().enumerate() {
        h.record(x, false);
        if let Some(i) = stack.iter().position(|&y| y == x) {
            stack.remove(i);
        }
        stack.push(x);
        if k % 500 == 0 {
            let want: Vec<PageId> = stack.iter().rev().take(50).copied().collect();
            assert_eq!(h.recent(50), want);
        }
    }
}
