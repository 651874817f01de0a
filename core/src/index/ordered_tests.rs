//! Tests of the ordered index: a proptest state machine against a `BTreeSet<(key, row)>`
//! model (duplicate keys, both directions, every `Seek` kind with prefix and full bounds,
//! stop conditions, resumption after modifications, relocation, leaf packing), page accounting,
//! out-of-memory behaviour, reservation guarantees, and 1M-entry memory measurements.

use super::ordered::{OrderedIndex, ScanDirection, Seek};
use crate::storage::RowId;
use crate::storage::pool::{PageBox, PageKind, PagePool};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::BTreeSet;

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

type Key = (u8, u8);

/// The rows of a fake table (row id -> two-column index key) and the model of the index.
/// New rows get even ids; relocations move rows to free odd ids, anywhere in id order.
struct World {
    keys: Vec<Key>,
    used: Vec<bool>,
    model: BTreeSet<(Key, u32)>,
}

impl World {
    fn new() -> World {
        World {
            keys: Vec::new(),
            used: Vec::new(),
            model: BTreeSet::new(),
        }
    }
    fn add_row(&mut self, k: Key) -> RowId {
        self.keys.extend([k, (0, 0)]);
        self.used.extend([true, false]);
        RowId(self.keys.len() as u32 - 2)
    }
    /// A free odd row id near `pick`, now holding key `k`.
    fn relocation_target(&mut self, pick: usize, k: Key) -> Option<RowId> {
        let half = self.keys.len() / 2;
        (0..half)
            .map(|d| 2 * ((pick + d) % half) + 1)
            .find(|&id| !self.used[id])
            .map(|id| {
                self.used[id] = true;
                self.keys[id] = k;
                RowId(id as u32)
            })
    }
    fn cmp(&self) -> impl FnMut(RowId, RowId) -> Ordering + '_ {
        |a, b| self.keys[a.0 as usize].cmp(&self.keys[b.0 as usize])
    }
    fn nth(&self, pick: usize) -> Option<(Key, u32)> {
        if self.model.is_empty() {
            None
        } else {
            self.model.iter().nth(pick % self.model.len()).copied()
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum SeekKind {
    Start,
    /// Bound on the first column only.
    Prefix(u8, bool),
    /// Bound on both columns.
    Full(Key, bool),
    /// After (key, row).
    After(Key, u32),
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Key),
    InsertRun(Key, u8),
    Remove(usize),
    RemoveAbsent(u32),
    Relocate(usize),
    Collect {
        asc: bool,
        seek: SeekKind,
        limit: usize,
        stop: Option<u8>,
    },
    ScanStart {
        asc: bool,
        limit: usize,
    },
    ScanResume {
        limit: usize,
    },
    Reserve(u8),
    Unreserve(u8),
    /// Pack this many leaf groups (OPTIMIZE), resuming after the last group packed.
    Pack(u8),
}

fn key() -> impl Strategy<Value = Key> {
    (0..6u8, 0..4u8)
}

fn seek() -> impl Strategy<Value = SeekKind> {
    prop_oneof![
        Just(SeekKind::Start),
        (0..7u8, any::<bool>()).prop_map(|(a, i)| SeekKind::Prefix(a, i)),
        (key(), any::<bool>()).prop_map(|(k, i)| SeekKind::Full(k, i)),
        (key(), 0..400u32).prop_map(|(k, r)| SeekKind::After(k, r)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => key().prop_map(Op::Insert),
        1 => (key(), 1..60u8).prop_map(|(k, n)| Op::InsertRun(k, n)),
        4 => any::<usize>().prop_map(Op::Remove),
        1 => (0..1000u32).prop_map(Op::RemoveAbsent),
        2 => any::<usize>().prop_map(Op::Relocate),
        3 => (any::<bool>(), seek(), 0..12usize, prop::option::of(0..6u8))
            .prop_map(|(asc, seek, limit, stop)| Op::Collect { asc, seek, limit, stop }),
        1 => (any::<bool>(), 0..8usize).prop_map(|(asc, limit)| Op::ScanStart { asc, limit }),
        2 => (0..8usize).prop_map(|limit| Op::ScanResume { limit }),
        1 => (0..20u8).prop_map(Op::Reserve),
        1 => (0..20u8).prop_map(Op::Unreserve),
        1 => (1..6u8).prop_map(Op::Pack),
    ]
}

/// What `collect` must return, computed from the model.
fn expected(
    w: &World,
    asc: bool,
    seek: SeekKind,
    limit: usize,
    stop: Option<u8>,
) -> (Vec<RowId>, bool) {
    let starts = |&(k, r): &(Key, u32)| -> bool {
        match (seek, asc) {
            (SeekKind::Start, _) => true,
            (SeekKind::Prefix(a, inc), true) => k.0 > a || (inc && k.0 == a),
            (SeekKind::Prefix(a, inc), false) => k.0 < a || (inc && k.0 == a),
            (SeekKind::Full(b, inc), true) => k > b || (inc && k == b),
            (SeekKind::Full(b, inc), false) => k < b || (inc && k == b),
            (SeekKind::After(b, last), true) => (k, r) > (b, last),
            (SeekKind::After(b, last), false) => (k, r) < (b, last),
        }
    };
    let iter: Box<dyn Iterator<Item = &(Key, u32)>> = if asc {
        Box::new(w.model.iter())
    } else {
        Box::new(w.model.iter().rev())
    };
    let mut out = Vec::new();
    for e in iter.filter(|e| starts(e)) {
        if stop == Some(e.0.0) {
            return (out, true);
        }
        if out.len() == limit {
            return (out, false);
        }
        out.push(RowId(e.1));
    }
    (out, true)
}

fn do_collect(
    idx: &OrderedIndex,
    w: &World,
    asc: bool,
    seek: SeekKind,
    limit: usize,
    stop: Option<u8>,
) -> (Vec<RowId>, bool) {
    let keys = &w.keys;
    let dir = if asc {
        ScanDirection::Ascending
    } else {
        ScanDirection::Descending
    };
    let mut stop_fn = |r: RowId| stop == Some(keys[r.0 as usize].0);
    let mut out = vec![RowId(u32::MAX)]; // collect appends
    let done = match seek {
        SeekKind::Start => idx.collect(dir, Seek::Start, limit, &mut stop_fn, &mut out),
        SeekKind::Prefix(a, inclusive) => {
            let mut c = |r: RowId| keys[r.0 as usize].0.cmp(&a);
            idx.collect(
                dir,
                Seek::Bound {
                    cmp: &mut c,
                    inclusive,
                },
                limit,
                &mut stop_fn,
                &mut out,
            )
        }
        SeekKind::Full(b, inclusive) => {
            let mut c = |r: RowId| keys[r.0 as usize].cmp(&b);
            idx.collect(
                dir,
                Seek::Bound {
                    cmp: &mut c,
                    inclusive,
                },
                limit,
                &mut stop_fn,
                &mut out,
            )
        }
        SeekKind::After(b, last) => {
            let mut c = |r: RowId| keys[r.0 as usize].cmp(&b);
            idx.collect(
                dir,
                Seek::After {
                    cmp: &mut c,
                    last: RowId(last),
                },
                limit,
                &mut stop_fn,
                &mut out,
            )
        }
    };
    assert_eq!(out.remove(0), RowId(u32::MAX));
    (out, done)
}

fn run_ops(ops: &[Op], caps: Option<(usize, usize)>, pool_pages: u32) -> Result<(), TestCaseError> {
    let pool = PagePool::new(pool_pages);
    let mut idx = match caps {
        Some((l, i)) => OrderedIndex::with_caps(l, i),
        None => OrderedIndex::new(),
    };
    let mut w = World::new();
    let mut cursor: Option<(bool, Key, u32)> = None;
    let mut pack_after: Option<(Key, u32)> = None;
    let mut pack_buf = Vec::new();
    let mut reserved = 0u64;
    for op in ops {
        match *op {
            Op::Insert(k) | Op::InsertRun(k, _) => {
                let n = if let Op::InsertRun(_, n) = *op { n } else { 1 };
                for _ in 0..n {
                    let row = w.add_row(k);
                    let before = (idx.len(), idx.reserved());
                    let r = idx.insert(&pool, row, &mut w.cmp());
                    match r {
                        Ok(()) => {
                            w.model.insert((k, row.0));
                            // A reservation covers this insert: give it back.
                            if reserved > 0 {
                                idx.unreserve(1);
                                reserved -= 1;
                            }
                        }
                        Err(e) => {
                            prop_assert_eq!(e.code, 902);
                            prop_assert!(
                                reserved == 0,
                                "an insert covered by a reservation failed"
                            );
                            prop_assert_eq!(before, (idx.len(), idx.reserved()));
                        }
                    }
                }
            }
            Op::Remove(pick) => {
                if let Some((k, r)) = w.nth(pick) {
                    prop_assert!(idx.remove(&pool, RowId(r), &mut w.cmp()));
                    w.model.remove(&(k, r));
                }
            }
            Op::RemoveAbsent(r) => {
                if (r as usize) < w.keys.len() && !w.model.contains(&(w.keys[r as usize], r)) {
                    prop_assert!(!idx.remove(&pool, RowId(r), &mut w.cmp()));
                }
            }
            Op::Relocate(pick) => {
                if let Some((k, r)) = w.nth(pick)
                    && let Some(new) = w.relocation_target(pick / 7, k)
                {
                    // The row moves to a free row id anywhere in id order.
                    prop_assert!(idx.relocate(RowId(r), new, &mut w.cmp()));
                    w.model.remove(&(k, r));
                    w.model.insert((k, new.0));
                }
            }
            Op::Collect {
                asc,
                seek,
                limit,
                stop,
            } => {
                let got = do_collect(&idx, &w, asc, seek, limit, stop);
                prop_assert_eq!(got, expected(&w, asc, seek, limit, stop), "{:?}", op);
            }
            Op::ScanStart { asc, limit } => {
                let (rows, done) = do_collect(&idx, &w, asc, SeekKind::Start, limit, None);
                prop_assert_eq!(
                    (rows.clone(), done),
                    expected(&w, asc, SeekKind::Start, limit, None)
                );
                cursor = match rows.last() {
                    Some(&r) if !done => Some((asc, w.keys[r.0 as usize], r.0)),
                    _ => None,
                };
            }
            Op::ScanResume { limit } => {
                if let Some((asc, k, last)) = cursor {
                    let seek = SeekKind::After(k, last);
                    let (rows, done) = do_collect(&idx, &w, asc, seek, limit, None);
                    prop_assert_eq!((rows.clone(), done), expected(&w, asc, seek, limit, None));
                    cursor = match rows.last() {
                        Some(&r) if !done => Some((asc, w.keys[r.0 as usize], r.0)),
                        _ => None,
                    };
                }
            }
            Op::Reserve(n) => match idx.reserve(&pool, n as usize) {
                Ok(()) => reserved += u64::from(n),
                Err(e) => prop_assert_eq!(e.code, 902),
            },
            Op::Unreserve(n) => {
                idx.unreserve(n as usize);
                reserved = reserved.saturating_sub(u64::from(n));
            }
            Op::Pack(n) => {
                for _ in 0..n {
                    let keys = &w.keys;
                    let mut past = |e: RowId| match pack_after {
                        None => true,
                        Some((k, last)) => (keys[e.0 as usize], e.0) > (k, last),
                    };
                    let before = (idx.len(), idx.reserved());
                    let step = idx.pack_group(&pool, &mut past, &mut w.cmp(), &mut pack_buf);
                    prop_assert_eq!(before, (idx.len(), idx.reserved()));
                    pack_after = step.last.map(|r| (w.keys[r.0 as usize], r.0));
                    idx.check(&mut w.cmp()).map_err(TestCaseError::fail)?;
                }
            }
        }
        prop_assert_eq!(idx.reserved(), reserved);
        prop_assert_eq!(idx.len(), w.model.len() as u64);
        idx.check(&mut w.cmp()).map_err(TestCaseError::fail)?;
        prop_assert_eq!(
            pool.used_pages_of(PageKind::OrderedIndex),
            u64::from(idx.pages())
        );
    }
    // A full scan in both directions equals the model.
    for asc in [true, false] {
        let got = do_collect(&idx, &w, asc, SeekKind::Start, usize::MAX, None);
        prop_assert_eq!(got, expected(&w, asc, SeekKind::Start, usize::MAX, None));
    }
    // Removing everything returns every page once no reservation is outstanding.
    idx.unreserve(usize::MAX);
    let all: Vec<(Key, u32)> = w.model.iter().copied().collect();
    for (k, r) in all {
        prop_assert!(idx.remove(&pool, RowId(r), &mut w.cmp()));
        w.model.remove(&(k, r));
    }
    idx.check(&mut w.cmp()).map_err(TestCaseError::fail)?;
    prop_assert_eq!(idx.len(), 0);
    if idx.pages() != 0 {
        // Only possible when nothing was removed after the last unreserve.
        let row = w.add_row((0, 0));
        idx.insert(&pool, row, &mut w.cmp())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(idx.remove(&pool, row, &mut w.cmp()));
    }
    prop_assert_eq!(pool.used_pages(), 0);
    Ok(())
}

fn caps() -> impl Strategy<Value = Option<(usize, usize)>> {
    prop_oneof![1 => Just(None), 3 => (3..7usize, 2..5usize).prop_map(Some)]
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn ordered_matches_model(ops in prop::collection::vec(op(), 1..250), caps in caps()) {
        run_ops(&ops, caps, 10_000)?;
    }

    #[test]
    fn ordered_tiny_pool_stays_consistent(
        ops in prop::collection::vec(op(), 1..250),
        l in 3..6usize,
        i in 2..4usize,
    ) {
        // One page of 64 nodes: inserts fail with 902, relocations must still succeed.
        run_ops(&ops, Some((l, i)), 1)?;
    }
}

/// Takes every free page of the pool (as table data) so the index cannot get more.
fn exhaust(pool: &PagePool) -> Vec<PageBox> {
    let mut held = Vec::new();
    while let Some(p) = pool.alloc(PageKind::Fixed) {
        held.push(p);
    }
    held
}

#[derive(Debug, Clone, Copy)]
enum Pattern {
    Random,
    Ascending,
    Descending,
    OneSpot,
    /// Each insert where it allocates the most nodes.
    Worst,
}

proptest! {
    #![proptest_config(config(64))]

    /// After `reserve(n)` succeeds, `n` inserts succeed with the pool exhausted, whatever
    /// their keys, with removals in between.
    #[test]
    fn reservation_covers_inserts(
        fill_pages in 1..5usize,
        n in 1..80usize,
        l in 3..8usize,
        i in 2..5usize,
        pattern in prop_oneof![
            Just(Pattern::Random),
            Just(Pattern::Ascending),
            Just(Pattern::Descending),
            Just(Pattern::OneSpot),
            Just(Pattern::Worst),
            Just(Pattern::Worst)
        ],
        seed in any::<u64>(),
        removes in 0..3u8,
    ) {
        const POOL: usize = 300;
        let pool = PagePool::new(POOL as u32);
        let mut idx = OrderedIndex::with_caps(l, i);
        let mut w = World::new();
        let mut rng = seed | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // Fill `fill_pages` pages until an insert fails: the node stock is then (nearly)
        // empty and the failed insert's spot has a full path.
        let hostages: Vec<PageBox> =
            (0..POOL - fill_pages).map(|_| pool.alloc(PageKind::Fixed).expect("page")).collect();
        let mut spot = (0, 0);
        for _ in 0..100_000 {
            let k = (1 + (next() % 250) as u8, 0);
            let row = w.add_row(k);
            let r = idx.insert(&pool, row, &mut w.cmp());
            if r.is_err() {
                spot = k;
                break;
            }
            w.model.insert((k, row.0));
        }
        for p in hostages {
            pool.free(PageKind::Fixed, p);
        }
        idx.reserve(&pool, n).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // The bound itself, independent of the slack of whole pages: the nodes the
        // reserved inserts take never exceed the target computed at reservation time
        // plus the nodes removals gave back.
        let target = idx.reservation_target();
        let (taken0, dropped0) = super::ordered::node_traffic();
        let held = exhaust(&pool);
        for j in 0..n {
            let k = match pattern {
                Pattern::Random => ((next() % 256) as u8, 0),
                Pattern::Ascending => (255, 0),
                Pattern::Descending => (0, 255 - j as u8),
                Pattern::OneSpot => spot,
                Pattern::Worst => {
                    // Probe every first-column value (the new row id goes last in its run).
                    let probe = RowId(w.keys.len() as u32);
                    w.keys.extend([(0, 0), (0, 0)]);
                    w.used.extend([false, false]);
                    let mut best = ((0, 0), 0);
                    for a in 0..=255u8 {
                        w.keys[probe.0 as usize] = (a, 0);
                        let need = idx.insert_need(probe, &mut w.cmp());
                        if need > best.1 {
                            best = ((a, 0), need);
                        }
                    }
                    best.0
                }
            };
            let row = w.add_row(k);
            let r = idx.insert(&pool, row, &mut w.cmp());
            prop_assert!(r.is_ok(), "reserved insert {} of {} failed: {:?}", j, n, r);
            prop_assert_eq!(idx.reserved(), (n - j) as u64, "insert consumed a reservation");
            idx.unreserve(1);
            w.model.insert((k, row.0));
            if removes > 0 && next() % u64::from(removes + 1) == 0 {
                let victim = w.nth(next() as usize).expect("not empty");
                prop_assert!(idx.remove(&pool, RowId(victim.1), &mut w.cmp()));
                w.model.remove(&victim);
            }
            idx.check(&mut w.cmp()).map_err(TestCaseError::fail)?;
        }
        prop_assert_eq!(idx.reserved(), 0);
        let (taken, dropped) = super::ordered::node_traffic();
        prop_assert!(
            taken - taken0 <= target + (dropped - dropped0),
            "{} inserts took {} nodes, reserved {} (+{} freed)",
            n, taken - taken0, target, dropped - dropped0
        );
        for p in held {
            pool.free(PageKind::Fixed, p);
        }
        idx.free_all(&pool);
        prop_assert_eq!(pool.used_pages(), 0);
    }
}

#[test]
fn reserve_fails_cleanly_and_unreserve_returns_stock() {
    let pool = PagePool::new(3);
    let mut idx = OrderedIndex::new();
    let mut w = World::new();
    let row = w.add_row((1, 1));
    idx.insert(&pool, row, &mut w.cmp()).expect("insert");
    assert_eq!(idx.pages(), 1);
    let err = idx
        .reserve(&pool, 10_000)
        .expect_err("needs more than 3 pages");
    assert_eq!(err.code, 902);
    assert_eq!(idx.reserved(), 0);
    let err = idx
        .reserve(&pool, usize::MAX)
        .expect_err("absurd reservation");
    assert_eq!(err.code, 902);
    assert_eq!(idx.reserved(), 0);
    assert_eq!(
        idx.pages(),
        1,
        "pages taken by the failed reservation are returned"
    );
    idx.reserve(&pool, 5).expect("small reservation");
    assert_eq!(idx.reserved(), 5);
    idx.unreserve(5);
    // The stock shrinks at the next operation that holds the pool.
    let row2 = w.add_row((2, 2));
    idx.insert(&pool, row2, &mut w.cmp()).expect("insert");
    assert_eq!(idx.pages(), 1);
    assert!(idx.remove(&pool, row, &mut w.cmp()));
    assert!(idx.remove(&pool, row2, &mut w.cmp()));
    assert_eq!(pool.used_pages(), 0);
}

#[test]
fn out_of_memory_leaves_index_unchanged() {
    let pool = PagePool::new(1);
    let mut idx = OrderedIndex::with_caps(3, 2);
    let mut w = World::new();
    let mut n = 0;
    let err = loop {
        let row = w.add_row(((n % 7) as u8, (n % 3) as u8));
        let r = idx.insert(&pool, row, &mut w.cmp());
        match r {
            Ok(()) => {
                w.model.insert((w.keys[row.0 as usize], row.0));
                n += 1;
            }
            Err(e) => break e,
        }
        assert!(n < 10_000);
    };
    assert_eq!(err.code, 902);
    idx.check(&mut w.cmp()).expect("consistent");
    assert_eq!(idx.len(), w.model.len() as u64);
    let got = do_collect(&idx, &w, true, SeekKind::Start, usize::MAX, None);
    assert_eq!(got, expected(&w, true, SeekKind::Start, usize::MAX, None));
    // Removing makes room again.
    let victims: Vec<(Key, u32)> = w.model.iter().step_by(2).copied().collect();
    for v in victims {
        assert!(idx.remove(&pool, RowId(v.1), &mut w.cmp()));
        w.model.remove(&v);
    }
    let row = w.add_row((3, 3));
    idx.insert(&pool, row, &mut w.cmp())
        .expect("room after removals");
    idx.check(&mut w.cmp()).expect("consistent");
    idx.free_all(&pool);
    assert_eq!(pool.used_pages(), 0);
}

/// Relocations into full leaves with no spare node shift entries leaf to leaf.
#[test]
fn relocate_without_spare_nodes_shifts_entries() {
    let pool = PagePool::new(1);
    let mut idx = OrderedIndex::with_caps(4, 2);
    let mut w = World::new();
    // Even row ids, all with the same key, until the page is used up.
    let mut rows = Vec::new();
    loop {
        w.keys.push((5, 5));
        w.keys.push((5, 5));
        let row = RowId(w.keys.len() as u32 - 2);
        if idx.insert(&pool, row, &mut w.cmp()).is_err() {
            break;
        }
        rows.push(row);
    }
    let before = super::ordered::carries();
    // Move each row to the odd id after its mirror image: across the run, both ways.
    let n = rows.len();
    for (j, &r) in rows.iter().enumerate() {
        let target = rows[n - 1 - j].0 + 1;
        assert!(idx.relocate(r, RowId(target), &mut w.cmp()));
        idx.check(&mut w.cmp()).expect("consistent");
    }
    assert!(
        super::ordered::carries() > before,
        "no relocation shifted entries"
    );
    assert_eq!(idx.len(), n as u64);
    assert_eq!(pool.used_pages(), 1);
}

/// Memory per entry after 1M random inserts (and ascending ones), and pages returned as
/// the index shrinks.
#[test]
fn million_entries_memory() {
    const N: u32 = 1_000_000;
    let pool = PagePool::new(1024);
    let keys: Vec<u64> = (0..u64::from(N))
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) % 500_000)
        .collect();
    let mut cmp = |a: RowId, b: RowId| keys[a.0 as usize].cmp(&keys[b.0 as usize]);
    let mut idx = OrderedIndex::new();
    let t = std::time::Instant::now();
    for i in 0..N {
        idx.insert(&pool, RowId(i), &mut cmp).expect("insert");
    }
    let secs = t.elapsed().as_secs_f64();
    idx.check(&mut cmp).expect("consistent");
    let random = f64::from(idx.pages()) * 32768.0 / f64::from(N);
    println!(
        "ordered index: {N} random inserts in {secs:.2}s, height {}, {} pages, {random:.2} bytes/entry",
        idx.height(),
        idx.pages()
    );
    assert!(random <= 8.0, "{random} bytes per entry");

    // Full ordered scan in batches with resumption.
    let mut out = Vec::new();
    let mut last: Option<RowId> = None;
    loop {
        let done = match last {
            None => idx.collect(
                ScanDirection::Ascending,
                Seek::Start,
                1000,
                &mut |_| false,
                &mut out,
            ),
            Some(l) => {
                let lk = keys[l.0 as usize];
                let mut c = |r: RowId| keys[r.0 as usize].cmp(&lk);
                idx.collect(
                    ScanDirection::Ascending,
                    Seek::After {
                        cmp: &mut c,
                        last: l,
                    },
                    1000,
                    &mut |_| false,
                    &mut out,
                )
            }
        };
        last = out.last().copied();
        if done {
            break;
        }
    }
    assert_eq!(out.len(), N as usize);
    assert!(
        out.windows(2)
            .all(|p| (keys[p[0].0 as usize], p[0]) < (keys[p[1].0 as usize], p[1]))
    );

    // Remove 90% in random order: merges and page evacuation return pages.
    let mut order: Vec<u32> = (0..N).collect();
    order.sort_by_key(|&i| keys[i as usize] ^ u64::from(i).wrapping_mul(31));
    for &i in &order[..N as usize / 10 * 9] {
        assert!(idx.remove(&pool, RowId(i), &mut cmp));
    }
    idx.check(&mut cmp).expect("consistent");
    let after = f64::from(idx.pages()) * 32768.0 / f64::from(N / 10);
    println!(
        "ordered index: after removing 90%, {} pages, {after:.2} bytes/entry",
        idx.pages()
    );
    assert!(after <= 14.0, "{after} bytes per entry after removals");
    for &i in &order[N as usize / 10 * 9..] {
        assert!(idx.remove(&pool, RowId(i), &mut cmp));
    }
    assert_eq!(pool.used_pages(), 0);

    // Ascending load: edge splits fill leaves completely.
    let mut seq = OrderedIndex::new();
    let mut by_id = |a: RowId, b: RowId| a.0.cmp(&b.0);
    for i in 0..N {
        seq.insert(&pool, RowId(i), &mut by_id).expect("insert");
    }
    seq.check(&mut by_id).expect("consistent");
    let asc = f64::from(seq.pages()) * 32768.0 / f64::from(N);
    println!("ordered index: {N} ascending inserts, {asc:.2} bytes/entry");
    assert!(asc <= 5.0, "{asc} bytes per entry");
    seq.free_all(&pool);
    assert_eq!(pool.used_pages(), 0);
}

/// OPTIMIZE's pass over an index after scattered deletes: leaves come out nearly full,
/// pages go back to the pool, the order and every entry stay, and inserts split the
/// packed leaves as usual afterwards.
#[test]
fn packing_fills_leaves_and_returns_pages() {
    let pool = PagePool::new(4096);
    let mut idx = OrderedIndex::new();
    let mut w = World::new();
    let n = 100_000u32;
    // Keys in a scattered order: leaves split 50/50 and end ~70% full.
    for i in 0..n {
        let k = (i.wrapping_mul(2_654_435_761) >> 8) as u64;
        let row = w.add_row(((k >> 8) as u8, k as u8));
        idx.insert(&pool, row, &mut w.cmp()).expect("room");
        w.model.insert((w.keys[row.0 as usize], row.0));
    }
    // Every second row by row id goes: leaves thin out evenly.
    let rows: Vec<(Key, u32)> = w.model.iter().copied().collect();
    for (k, r) in rows {
        if r % 4 == 0 {
            assert!(idx.remove(&pool, RowId(r), &mut w.cmp()));
            w.model.remove(&(k, r));
        }
    }
    idx.check(&mut w.cmp()).expect("consistent");
    let pages_before = idx.pages();
    let fill_before = idx.leaf_fill();
    let promised = idx.reclaimable_pages();
    assert!(promised > 0, "packing would give nothing back");
    let mut after: Option<(Key, u32)> = None;
    let mut buf = Vec::new();
    let mut groups = 0;
    let mut freed = 0;
    loop {
        let keys = &w.keys;
        let mut past = |e: RowId| match after {
            None => true,
            Some((k, last)) => (keys[e.0 as usize], e.0) > (k, last),
        };
        let step = idx.pack_group(&pool, &mut past, &mut w.cmp(), &mut buf);
        let Some(last) = step.last else { break };
        after = Some((w.keys[last.0 as usize], last.0));
        freed += step.leaves_freed;
        groups += 1;
        assert!(groups < 10_000, "the pass must end");
    }
    idx.check(&mut w.cmp()).expect("consistent after packing");
    let fill = idx.leaf_fill();
    let avg = |f: &[usize]| f.iter().sum::<usize>() as f64 / f.len() as f64;
    assert!(
        avg(&fill) > 0.97 * super::ordered::LEAF_CAP as f64,
        "leaves {:.1} full on average after packing ({:.1} before)",
        avg(&fill),
        avg(&fill_before)
    );
    assert_eq!(fill_before.len() - fill.len(), freed as usize);
    assert!(
        pages_before - idx.pages() >= promised,
        "{pages_before} -> {} pages, {promised} promised",
        idx.pages()
    );
    assert_eq!(idx.reclaimable_pages(), 0);
    assert!(
        idx.pages() * 10 < pages_before * 8,
        "{} pages after packing, {pages_before} before",
        idx.pages()
    );
    assert_eq!(
        pool.used_pages_of(PageKind::OrderedIndex),
        u64::from(idx.pages())
    );
    let got = do_collect(&idx, &w, true, SeekKind::Start, usize::MAX, None);
    assert_eq!(got, expected(&w, true, SeekKind::Start, usize::MAX, None));
    // Inserts into packed leaves split them as usual.
    for i in 0..1000u32 {
        let row = w.add_row(((i % 251) as u8, (i / 251) as u8));
        idx.insert(&pool, row, &mut w.cmp()).expect("room");
        w.model.insert((w.keys[row.0 as usize], row.0));
    }
    idx.check(&mut w.cmp()).expect("consistent after inserts");
    let got = do_collect(&idx, &w, false, SeekKind::Start, usize::MAX, None);
    assert_eq!(got, expected(&w, false, SeekKind::Start, usize::MAX, None));
}
