//! Tests of the hash index: a proptest state machine against a `HashMap` model (with
//! deliberately colliding hashes), page accounting, out-of-memory behaviour, and a 1M-entry
//! measurement of memory per entry and lookup rate.

use super::hash::HashIndex;
use crate::storage::RowId;
use crate::storage::pool::{PageKind, PagePool};
use proptest::prelude::*;
use std::collections::HashMap;

/// `cases` proptest cases (`PROPTEST_CASES` overrides), no regression files written.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(cases),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// splitmix64: stands in for xxh3 of the key.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The rows of a fake table: row id -> key; the index stores only hashes and row ids.
struct Table {
    keys: Vec<u64>,
    /// Hash function variant: 0 = well mixed, 1 = many keys share a hash.
    collide: bool,
}

impl Table {
    fn hash(&self, key: u64) -> u32 {
        if self.collide {
            (mix(key % 13) as u32) & !0xF0
        } else {
            mix(key) as u32
        }
    }
    fn add_row(&mut self, key: u64) -> RowId {
        self.keys.push(key);
        RowId(self.keys.len() as u32 - 1)
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    Remove(u64),
    Find(u64),
    Relocate(u64),
    Bulk(u64, u16),
    RemoveMany(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..700u64).prop_map(Op::Insert),
        3 => (0..700u64).prop_map(Op::Remove),
        3 => (0..700u64).prop_map(Op::Find),
        1 => (0..700u64).prop_map(Op::Relocate),
        1 => ((0..100_000u64), (1..400u16)).prop_map(|(k, n)| Op::Bulk(k, n)),
        1 => (1..400u16).prop_map(Op::RemoveMany),
    ]
}

fn run_ops(ops: &[Op], collide: bool, pool_pages: u32) -> Result<(), TestCaseError> {
    let pool = PagePool::new(pool_pages);
    let mut t = Table {
        keys: Vec::new(),
        collide,
    };
    let mut idx = HashIndex::new();
    let mut model: HashMap<u64, RowId> = HashMap::new();
    let insert = |idx: &mut HashIndex, t: &mut Table, model: &mut HashMap<u64, RowId>, key: u64| {
        if model.contains_key(&key) {
            return Ok(());
        }
        let row = t.add_row(key);
        let before = (idx.len(), idx.pages());
        match idx.insert(&pool, t.hash(key), row) {
            Ok(()) => {
                model.insert(key, row);
                Ok(())
            }
            Err(e) => {
                prop_assert_eq!(e.code, 625);
                prop_assert_eq!(before, (idx.len(), idx.pages()));
                Ok(())
            }
        }
    };
    for op in ops {
        match *op {
            Op::Insert(k) => insert(&mut idx, &mut t, &mut model, k)?,
            Op::Bulk(k, n) => {
                for i in 0..u64::from(n) {
                    insert(&mut idx, &mut t, &mut model, k + i)?;
                }
            }
            Op::Remove(k) => {
                let expect = model.remove(&k);
                let row = expect.unwrap_or(RowId(u32::MAX - 1));
                prop_assert_eq!(idx.remove(&pool, t.hash(k), row), expect.is_some());
            }
            Op::RemoveMany(n) => {
                let victims: Vec<u64> = model.keys().copied().take(n as usize).collect();
                for k in victims {
                    let row = model.remove(&k).expect("in model");
                    prop_assert!(idx.remove(&pool, t.hash(k), row));
                }
            }
            Op::Find(k) => {
                let keys = &t.keys;
                let got = idx.find(t.hash(k), |r| keys[r.0 as usize] == k);
                prop_assert_eq!(got, model.get(&k).copied());
            }
            Op::Relocate(k) => {
                if let Some(&old) = model.get(&k) {
                    let new = t.add_row(k);
                    prop_assert!(idx.relocate(t.hash(k), old, new));
                    model.insert(k, new);
                } else {
                    prop_assert!(!idx.relocate(t.hash(k), RowId(u32::MAX - 1), RowId(0)));
                }
            }
        }
        prop_assert_eq!(idx.len(), model.len() as u64);
        if let Err(e) = idx.check() {
            return Err(TestCaseError::fail(e));
        }
        prop_assert_eq!(
            pool.used_pages_of(PageKind::HashIndex),
            u64::from(idx.pages())
        );
    }
    // Every entry is reported exactly once, and every key is found.
    let mut seen = HashMap::new();
    idx.for_each(|h, r| {
        seen.insert(r, h);
    });
    prop_assert_eq!(seen.len(), model.len());
    for (&k, &r) in &model {
        prop_assert_eq!(seen.get(&r).copied(), Some(t.hash(k)));
        let keys = &t.keys;
        prop_assert_eq!(idx.find(t.hash(k), |c| keys[c.0 as usize] == k), Some(r));
    }
    // Removing everything returns every page.
    for (&k, &r) in &model {
        prop_assert!(idx.remove(&pool, t.hash(k), r));
    }
    prop_assert_eq!(idx.pages(), 0);
    prop_assert_eq!(pool.used_pages(), 0);
    idx.check().map_err(TestCaseError::fail)?;
    Ok(())
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn hash_matches_model(ops in prop::collection::vec(op(), 1..300)) {
        run_ops(&ops, false, 10_000)?;
    }

    #[test]
    fn hash_matches_model_colliding(ops in prop::collection::vec(op(), 1..200)) {
        run_ops(&ops, true, 10_000)?;
    }

    #[test]
    fn hash_tiny_pool_stays_consistent(ops in prop::collection::vec(op(), 1..200), pages in 1u32..4) {
        run_ops(&ops, false, pages)?;
    }
}

#[test]
fn holds_no_page_until_first_insert() {
    let pool = PagePool::new(4);
    let mut idx = HashIndex::new();
    assert_eq!(idx.pages(), 0);
    assert_eq!(idx.find(7, |_| true), None);
    assert!(!idx.remove(&pool, 7, RowId(1)));
    idx.prefetch(7);
    idx.insert(&pool, 7, RowId(1)).expect("insert");
    assert_eq!(idx.pages(), 1);
    assert_eq!(pool.used_pages(), 1);
    assert!(idx.remove(&pool, 7, RowId(1)));
    assert_eq!(pool.used_pages(), 0);
}

#[test]
fn out_of_memory_leaves_index_unchanged() {
    // One page: the directory. Hashes that all land in bucket 0 fill its 8 slots; the
    // 9th entry needs an overflow page.
    let pool = PagePool::new(1);
    let mut idx = HashIndex::new();
    for i in 0..8u32 {
        idx.insert(&pool, i << 8, RowId(i))
            .expect("fits in the primary container");
    }
    let err = idx
        .insert(&pool, 99 << 8, RowId(99))
        .expect_err("needs an overflow page");
    assert_eq!(err.code, 625);
    assert_eq!(idx.len(), 8);
    idx.check().expect("consistent");
    assert_eq!(idx.find(99 << 8, |_| true), None);
    for i in 0..8u32 {
        assert_eq!(idx.find(i << 8, |r| r == RowId(i)), Some(RowId(i)));
    }
    // Other buckets still accept entries; removing frees room.
    idx.insert(&pool, 1, RowId(100)).expect("other bucket");
    assert!(idx.remove(&pool, 3 << 8, RowId(3)));
    idx.insert(&pool, 99 << 8, RowId(99)).expect("room again");
    idx.check().expect("consistent");
    idx.free_all(&pool);
    assert_eq!(pool.used_pages(), 0);
    assert_eq!(idx.len(), 0);
}

#[test]
fn splits_wait_for_a_directory_page() {
    // Two pages: the first directory page and one overflow page. The index cannot grow
    // past 512 buckets; inserts go on into overflow containers until those run out.
    let pool = PagePool::new(2);
    let mut idx = HashIndex::new();
    let mut n = 0u32;
    while idx
        .insert(&pool, mix(u64::from(n)) as u32, RowId(n))
        .is_ok()
    {
        n += 1;
        assert!(n < 100_000);
    }
    assert_eq!(idx.buckets(), 512);
    assert!(n > 3300, "only {n} entries");
    idx.check().expect("consistent");
    for i in 0..n {
        assert_eq!(
            idx.find(mix(u64::from(i)) as u32, |r| r == RowId(i)),
            Some(RowId(i))
        );
    }
    for i in 0..n {
        assert!(idx.remove(&pool, mix(u64::from(i)) as u32, RowId(i)));
    }
    assert_eq!(pool.used_pages(), 0);
}

/// 1M entries: bytes of pages per entry, lookups per second, and pages back on removal.
#[test]
fn million_entries_memory_and_lookup_rate() {
    const N: u32 = 1_000_000;
    let pool = PagePool::new(1024);
    let mut idx = HashIndex::new();
    let hash = |i: u32| mix(u64::from(i)) as u32;
    for i in 0..N {
        idx.insert(&pool, hash(i), RowId(i)).expect("insert");
    }
    idx.check().expect("consistent");
    let bytes = f64::from(idx.pages()) * 32768.0 / f64::from(N);
    let primary = idx.entries_in_primary() as f64 / f64::from(N);
    println!(
        "hash index: {N} entries, {} buckets, {} pages, {bytes:.2} bytes/entry, {:.1}% of entries in the primary line",
        idx.buckets(),
        idx.pages(),
        primary * 100.0
    );
    assert!(bytes <= 12.0, "{bytes} bytes per entry");
    assert!(primary > 0.8);

    // Lookup rate: random order, plain and with batched prefetch.
    let order: Vec<u32> = (0..N)
        .map(|i| (mix(u64::from(i) + 77) % u64::from(N)) as u32)
        .collect();
    let t = std::time::Instant::now();
    let mut found = 0u32;
    for &i in &order {
        found += u32::from(idx.find(hash(i), |r| r.0 == i).is_some());
    }
    let plain = f64::from(N) / t.elapsed().as_secs_f64();
    assert_eq!(found, N);
    let t = std::time::Instant::now();
    let mut found = 0u32;
    for batch in order.chunks(16) {
        for &i in batch {
            idx.prefetch(hash(i));
        }
        for &i in batch {
            found += u32::from(idx.find(hash(i), |r| r.0 == i).is_some());
        }
    }
    let batched = f64::from(N) / t.elapsed().as_secs_f64();
    assert_eq!(found, N);
    println!(
        "hash index: {:.1} M lookups/s plain, {:.1} M lookups/s with prefetch",
        plain / 1e6,
        batched / 1e6
    );
    // The same with the candidate's key read from a separate 8 MB "row" array, as a
    // real lookup does (one more cache miss per lookup).
    let keys: Vec<u64> = (0..N).map(|i| mix(u64::from(i) ^ 0xABCD)).collect();
    let t = std::time::Instant::now();
    let mut found = 0u32;
    for batch in order.chunks(16) {
        for &i in batch {
            idx.prefetch(hash(i));
        }
        for &i in batch {
            let key = keys[i as usize];
            found += u32::from(idx.find(hash(i), |r| keys[r.0 as usize] == key).is_some());
        }
    }
    let with_rows = f64::from(N) / t.elapsed().as_secs_f64();
    assert_eq!(found, N);
    println!(
        "hash index: {:.1} M lookups/s with prefetch and a key check in a row array",
        with_rows / 1e6
    );

    // Shrink by half: merges return directory pages, memory per entry stays bounded.
    for i in (0..N).step_by(2) {
        assert!(idx.remove(&pool, hash(i), RowId(i)));
    }
    idx.check().expect("consistent");
    let bytes_half = f64::from(idx.pages()) * 32768.0 / f64::from(N / 2);
    println!(
        "hash index: after removing half, {} pages, {bytes_half:.2} bytes/entry",
        idx.pages()
    );
    assert!(
        bytes_half <= 14.0,
        "{bytes_half} bytes per entry after removals"
    );
    for i in (1..N).step_by(2) {
        assert!(idx.remove(&pool, hash(i), RowId(i)));
    }
    assert_eq!(idx.pages(), 0);
    assert_eq!(pool.used_pages(), 0);
}

#[test]
fn overflow_pages_are_compacted() {
    // 32 distinct hashes: chains of ~1250 entries, thousands of overflow containers.
    const N: u32 = 40_000;
    let pool = PagePool::new(64);
    let mut idx = HashIndex::new();
    let hash = |i: u32| mix(u64::from(i % 32)) as u32;
    for i in 0..N {
        idx.insert(&pool, hash(i), RowId(i)).expect("insert");
    }
    idx.check().expect("consistent");
    let (full_pages, _) = idx.overflow_stats();
    let mut order: Vec<u32> = (0..N).collect();
    order.sort_by_key(|&i| mix(u64::from(i) ^ 0x5555));
    for (k, &i) in order.iter().enumerate().take(N as usize * 9 / 10) {
        assert!(idx.remove(&pool, hash(i), RowId(i)));
        if k % 4999 == 0 {
            idx.check().expect("consistent");
        }
    }
    idx.check().expect("consistent");
    let (pages, used) = idx.overflow_stats();
    println!("hash index: overflow pages {full_pages} -> {pages} for {used} containers");
    assert!(
        u64::from(pages) <= used.div_ceil(1024) + 2,
        "{pages} overflow pages for {used} containers"
    );
    for &i in order.iter().skip(N as usize * 9 / 10) {
        assert_eq!(idx.find(hash(i), |r| r.0 == i), Some(RowId(i)));
    }
    idx.free_all(&pool);
    assert_eq!(pool.used_pages(), 0);
}

/// OPTIMIZE's compaction after deletes: the index comes down to the pages a fresh build
/// of the remaining entries holds (or fewer), and every entry is still found.
#[test]
fn compaction_after_deletes_matches_a_fresh_build() {
    let pool = PagePool::new(8192);
    let mut h = HashIndex::new();
    let n = 400_000u64;
    for k in 0..n {
        h.insert(&pool, mix(k) as u32, RowId(k as u32))
            .expect("room");
    }
    for k in (0..n).filter(|k| k % 5 < 2) {
        assert!(h.remove(&pool, mix(k) as u32, RowId(k as u32)));
    }
    let mut fresh = HashIndex::new();
    for k in (0..n).filter(|k| k % 5 >= 2) {
        fresh
            .insert(&pool, mix(k) as u32, RowId(k as u32))
            .expect("room");
    }
    let before = h.pages();
    assert!(
        before > fresh.pages(),
        "{before} vs fresh {}",
        fresh.pages()
    );
    let freed = h.compact(&pool, u32::MAX, u32::MAX);
    assert_eq!(before - h.pages(), freed);
    assert!(
        h.pages() <= fresh.pages(),
        "{} pages after compaction, a fresh build holds {}",
        h.pages(),
        fresh.pages()
    );
    h.check().expect("consistent");
    for k in 0..n {
        let found = h.find(mix(k) as u32, |r| r == RowId(k as u32)).is_some();
        assert_eq!(found, k % 5 >= 2, "key {k}");
    }
    assert_eq!(
        pool.used_pages_of(PageKind::HashIndex),
        u64::from(h.pages() + fresh.pages())
    );
    // Inserts after it split as usual.
    for k in n..n + 10_000 {
        h.insert(&pool, mix(k) as u32, RowId(k as u32))
            .expect("room");
    }
    h.check().expect("consistent after inserts");
}
