//! What `disk_seed` found: dirty pages that nobody wrote back (no cleaner running, no
//! checkpoint until the undo log is half full) were never chosen as victims — a miss
//! takes a clean victim when one exists — so a cache filled by a load kept those dirty
//! pages for good and served reads from the few clean frames left (after a bulk load of
//! the seed's t1 at 64M, 2047 of 2048 frames per node stayed dirty).
//!
//! Now a miss writes the dirty pages the policy passed over (cold ones first), and the
//! cluster runs each node's cleaner. The first test checks the cache alone, without a
//! cleaner; the second with the background cleaner.

use rndb::disk::io::{FileSystem, MemFileSystem};
use rndb::disk::page::PAGE_HEADER_BYTES;
use rndb::disk::pgman::{Intent, PageAddr, PageCache, PageCacheConfig};
use rndb::disk::{Lsn, WalSync};
use rndb_benches::Rng;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

struct NoWal;

impl WalSync for NoWal {
    fn sync_to(&self, _lsn: Lsn) -> rndb::Result<()> {
        Ok(())
    }
}

fn addr(page_no: u32) -> PageAddr {
    PageAddr {
        file_no: 1,
        page_no,
    }
}

/// A 4M cache (128 frames): 256 pages loaded and checkpointed, then 127 pages written
/// and left dirty; returns the cache.
fn loaded_cache() -> PageCache {
    let fs = MemFileSystem::new();
    let file = fs
        .create(Path::new("data1.dat"), 512 * 32 * 1024)
        .expect("create");
    let cache = PageCache::new(
        PageCacheConfig {
            capacity_bytes: 4 << 20,
            entries_per_page: 10,
        },
        Arc::new(NoWal),
    )
    .expect("cache");
    cache.register_file(1, file);
    for p in 0..256 {
        let r = cache.get(addr(p), Intent::Format).expect("format");
        r.write(|b| b[PAGE_HEADER_BYTES] = p as u8);
        r.set_lsn_dirty(1);
    }
    cache.flush_all().expect("checkpoint");
    // A load goes on after the checkpoint: 127 new pages, dirty, nobody writes them.
    for p in 256..383 {
        let r = cache.get(addr(p), Intent::Format).expect("format");
        r.write(|b| b[PAGE_HEADER_BYTES] = p as u8);
        r.set_lsn_dirty(2);
    }
    cache
}

/// Hit ratio (percent) of `n` uniform reads over pages 0..100, measured over the second
/// half (a working set of 100 pages in a cache of 128 frames).
fn read_hit_ratio(cache: &PageCache, n: u64) -> f64 {
    let mut rng = Rng::new(7);
    let mut before = None;
    for i in 0..n {
        if i == n / 2 {
            before = Some(cache.stats());
        }
        let p = (rng.next_u64() % 100) as u32;
        let r = cache.get(addr(p), Intent::Read).expect("read");
        assert_eq!(r.read(|b| b[PAGE_HEADER_BYTES]), p as u8);
    }
    let (a, b) = (before.expect("half"), cache.stats());
    let hit = b.page_requests_direct_return - a.page_requests_direct_return;
    let miss = b.page_requests_wait_io - a.page_requests_wait_io;
    100.0 * hit as f64 / (hit + miss) as f64
}

#[test]
fn dirty_pages_left_by_a_load_do_not_freeze_the_cache() {
    let cache = loaded_cache();
    let ratio = read_hit_ratio(&cache, 20_000);
    let st = cache.stats();
    // 100 pages in 128 frames: every policy reaches ~100% once warm. Before misses wrote
    // the dirty pages they passed over: ~1% (one clean frame reused for every miss),
    // 127 pages still dirty.
    assert!(
        ratio > 90.0,
        "hit ratio {ratio:.2}% with {} dirty of {} resident pages, {} written",
        st.dirty_pages,
        st.resident_pages,
        st.pages_written
    );
}

#[test]
fn with_the_background_cleaner_the_working_set_fits() {
    let cache = loaded_cache();
    cache
        .start_cleaner(Duration::from_millis(1))
        .expect("cleaner");
    std::thread::sleep(Duration::from_millis(50));
    let ratio = read_hit_ratio(&cache, 20_000);
    cache.stop_cleaner();
    assert!(ratio > 90.0, "hit ratio {ratio:.2}%");
}
