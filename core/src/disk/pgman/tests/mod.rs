//! Tests of the page cache on `MemFileSystem` (one on real files) with a recording
//! `WalSync` and a recording file wrapper that log syncs and writes in one order.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::*;
use crate::disk::io::{Faults, FileSystem, MemFileSystem, OsFileSystem};
use crate::disk::page::{PAGE_HEADER_BYTES, PageKind, verify};
use crate::disk::policy::PageCachePolicy;

const MB: u64 = 1 << 20;
const FILE_PAGES: u64 = 600;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Event {
    Sync(Lsn),
    Write { page_no: u32, lsn: Lsn },
}

#[derive(Default)]
struct Log {
    events: Mutex<Vec<Event>>,
}

/// A WalSync that records every call.
struct RecWal(Arc<Log>);

impl WalSync for RecWal {
    fn sync_to(&self, lsn: Lsn) -> Result<()> {
        self.0.events.lock().push(Event::Sync(lsn));
        Ok(())
    }
}

/// A DiskFile that records writes (with the LSN of the page written) and can slow reads.
struct RecFile {
    inner: Arc<dyn DiskFile>,
    log: Arc<Log>,
    read_delay: Duration,
    write_delay: Duration,
    reads: AtomicU64,
}

impl DiskFile for RecFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if !self.read_delay.is_zero() {
            std::thread::sleep(self.read_delay);
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        if !self.write_delay.is_zero() {
            std::thread::sleep(self.write_delay);
        }
        let r = self.inner.write_at(buf, offset);
        if r.is_ok() {
            let h = verify(buf, 1, (offset / DISK_PAGE_SIZE as u64) as u32).unwrap();
            self.log.events.lock().push(Event::Write {
                page_no: h.page_no,
                lsn: h.lsn,
            });
        }
        r
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.inner.sync_data()
    }
    fn len_bytes(&self) -> std::io::Result<u64> {
        self.inner.len_bytes()
    }
    fn extend_to(&self, len: u64) -> std::io::Result<()> {
        self.inner.extend_to(len)
    }
}

struct Rig {
    fs: MemFileSystem,
    log: Arc<Log>,
    file: Arc<RecFile>,
    cache: PageCache,
}

fn rig_with(capacity_bytes: u64, read_delay: Duration, write_delay: Duration) -> Rig {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    let raw = fs
        .create(Path::new("/d/f1.dat"), FILE_PAGES * DISK_PAGE_SIZE as u64)
        .unwrap();
    let log = Arc::new(Log::default());
    let file = Arc::new(RecFile {
        inner: raw,
        log: log.clone(),
        read_delay,
        write_delay,
        reads: AtomicU64::new(0),
    });
    let cfg = PageCacheConfig {
        capacity_bytes,
        ..PageCacheConfig::default()
    };
    let cache = PageCache::new(cfg, Arc::new(RecWal(log.clone()))).unwrap();
    cache.register_file(1, file.clone());
    Rig {
        fs,
        log,
        file,
        cache,
    }
}

fn rig(capacity_bytes: u64) -> Rig {
    rig_with(capacity_bytes, Duration::ZERO, Duration::ZERO)
}

fn at(page_no: u32) -> PageAddr {
    PageAddr {
        file_no: 1,
        page_no,
    }
}

/// Writes `v` into the body of page `p` with LSN `lsn`.
fn put(c: &PageCache, p: u32, v: u8, lsn: Lsn) {
    let r = c.get(at(p), Intent::Write).unwrap();
    r.write(|b| b[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + 64].fill(v));
    r.set_lsn_dirty(lsn);
}

fn body_byte(c: &PageCache, p: u32) -> u8 {
    c.get(at(p), Intent::Read)
        .unwrap()
        .read(|b| b[PAGE_HEADER_BYTES])
}

/// The page as stored in the file.
fn on_disk(r: &Rig, p: u32) -> Vec<u8> {
    let mut b = vec![0u8; DISK_PAGE_SIZE];
    r.file
        .inner
        .read_at(&mut b, p as u64 * DISK_PAGE_SIZE as u64)
        .unwrap();
    b
}

mod concurrent;

#[test]
fn config_limits() {
    let wal: Arc<dyn WalSync> = Arc::new(crate::disk::NoWal);
    let small = PageCacheConfig {
        capacity_bytes: 4 * MB - 1,
        ..PageCacheConfig::default()
    };
    assert_eq!(PageCache::new(small, wal.clone()).err().unwrap().code, 5000);
    let c = PageCache::new(PageCacheConfig::default(), wal).unwrap();
    assert_eq!(c.stats().capacity_pages, 2048);
    assert_eq!(c.resize(3 * MB).unwrap_err().code, 5000);
    // An unregistered file is an error, not a panic, and counts nothing.
    assert!(c.get(at(0), Intent::Read).is_err());
    assert_eq!(c.stats().page_requests(), 0);
}

/// A deterministic trace with a hot set, a loop and repeats; same counts as the policy.
#[test]
fn hit_miss_counts_match_the_policy() {
    let r = rig(4 * MB);
    let frames = 128;
    let mut policy = PageCachePolicy::with_config(PolicyConfig::new(frames));
    let mut x: u64 = 12345;
    let mut prev: Option<u32> = None;
    let mut n = 0u64;
    for step in 0..6000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let page = match (x >> 33) % 10 {
            0..=5 => (x >> 40) % 60,       // hot set
            6..=8 => 100 + step % 250,     // a loop larger than the cache
            _ => prev.unwrap_or(0) as u64, // same page again: correlated
        } as u32;
        let correlated = prev == Some(page);
        prev = Some(page);
        drop(r.cache.get(at(page), Intent::Read).unwrap());
        policy.access_any(page_id(1, page), correlated);
        n += 1;
    }
    let s = r.cache.stats();
    let p = policy.stats();
    assert_eq!(s.page_requests(), n);
    assert_eq!(s.page_requests_direct_return, p.hits);
    assert_eq!(s.page_requests_wait_io, p.misses);
    assert_eq!(s.page_requests_wait_queue, 0);
    assert_eq!(s.pages_read, p.misses);
    assert!(p.correlated_hits > 0);
    assert_eq!(r.cache.policy_stats().correlated_hits, p.correlated_hits);
    assert_eq!(r.file.reads.load(Ordering::SeqCst), p.misses);
    let mut a = policy.resident_pages();
    let mut b = r.cache.inner.state.lock().policy.resident_pages();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b);
    assert_eq!(s.resident_pages, frames);
    r.cache.check();
}

#[test]
fn dirty_page_written_only_after_wal_sync() {
    let r = rig(4 * MB);
    put(&r.cache, 3, 7, 100);
    put(&r.cache, 4, 8, 90);
    put(&r.cache, 3, 9, 120); // same page again: LSN rises, still one dirty entry
    assert_eq!(r.cache.stats().dirty_pages, 2);
    // Cleaning order: page 3 became dirty first.
    assert_eq!(r.cache.clean_step(1).unwrap(), 1);
    r.cache.note_durable_lsn(0);
    assert_eq!(r.cache.flush_all().unwrap(), 90);
    let ev = r.log.events.lock().clone();
    assert_eq!(
        ev,
        vec![
            Event::Sync(120),
            Event::Write {
                page_no: 3,
                lsn: 120
            },
            // 90 <= 120 is known durable: no sync, no log wait.
            Event::Write {
                page_no: 4,
                lsn: 90
            },
        ]
    );
    let s = r.cache.stats();
    assert_eq!(
        (s.pages_written, s.pages_written_lcp, s.log_waits),
        (1, 1, 1)
    );
    assert_eq!(s.dirty_pages, 0);
    let d = on_disk(&r, 3);
    let h = verify(&d, 1, 3).unwrap();
    assert_eq!((h.kind, h.lsn), (PageKind::Data, 120));
    assert_eq!(d[PAGE_HEADER_BYTES], 9);
    // A page whose header says otherwise keeps its kind and extra word.
    let p = r.cache.get(at(5), Intent::Format).unwrap();
    p.write(|b| {
        b[4] = PageKind::ExtentHeaders as u8;
        b[24] = 0xab;
    });
    p.set_lsn_dirty(130);
    drop(p);
    assert_eq!(r.cache.flush_all().unwrap(), 130);
    let h = verify(&on_disk(&r, 5), 1, 5).unwrap();
    assert_eq!(
        (h.kind, h.extra, h.lsn),
        (PageKind::ExtentHeaders, 0xab, 130)
    );
    // Every write is preceded by a sync at or above its LSN.
    let mut synced = 0;
    for e in r.log.events.lock().iter() {
        match *e {
            Event::Sync(l) => synced = synced.max(l),
            Event::Write { lsn, .. } => assert!(lsn <= synced, "write before WAL sync"),
        }
    }
    r.cache.check();
}

#[test]
fn dirty_victim_is_written_before_reuse() {
    let r = rig(4 * MB);
    for p in 0..128 {
        put(&r.cache, p, p as u8 + 1, 10 + p as u64);
    }
    assert_eq!(r.cache.stats().dirty_pages, 128);
    assert_eq!(r.fs.stats().writes, 0);
    for p in 200..210 {
        drop(r.cache.get(at(p), Intent::Read).unwrap());
    }
    // The first miss writes a dirty victim for its frame, and the dirty pages the
    // policy passed over (at most 8 per miss), which become the clean victims of the
    // next misses; every page written once, none lost.
    let s = r.cache.stats();
    assert!(
        (1..=1 + 8 * 10).contains(&s.pages_written),
        "{}",
        s.pages_written
    );
    assert_eq!(r.fs.stats().writes, s.pages_written);
    assert_eq!(s.dirty_pages as u64 + s.pages_written, 128);
    assert_eq!(s.resident_pages, 128);
    r.cache.check();
    // Every change survives: evicted ones come back from disk.
    for p in 0..128 {
        assert_eq!(body_byte(&r.cache, p), p as u8 + 1);
    }
    r.cache.check();
}

#[test]
fn pinned_pages_are_not_evicted() {
    let r = rig(4 * MB);
    let pins: Vec<_> = (0..100)
        .map(|p| r.cache.get(at(p), Intent::Read).unwrap())
        .collect();
    for p in 200..500 {
        drop(r.cache.get(at(p), Intent::Read).unwrap());
    }
    let before = r.cache.stats().page_requests_direct_return;
    for p in 0..100 {
        assert!(r.cache.inner.state.lock().policy.contains(page_id(1, p)));
        assert_eq!(pins[p as usize].addr(), at(p));
    }
    drop(pins);
    for p in 0..100 {
        drop(r.cache.get(at(p), Intent::Read).unwrap());
    }
    assert_eq!(r.cache.stats().page_requests_direct_return, before + 100);
    r.cache.check();
}

#[test]
fn corrupted_page_is_reported_and_not_cached() {
    let r = rig(4 * MB);
    put(&r.cache, 9, 5, 1);
    r.cache.flush_all().unwrap();
    r.cache.drop_file(1).unwrap();
    r.cache.register_file(1, r.file.clone());
    let off = 9 * DISK_PAGE_SIZE as u64 + 1000;
    assert!(r.fs.corrupt_byte(Path::new("/d/f1.dat"), off));
    let e = r.cache.get(at(9), Intent::Read).err().unwrap();
    assert_eq!(e.code, 896);
    let s = r.cache.stats();
    // The first read (page 9 before it was written) counted; the failed one did not.
    assert_eq!((s.read_errors, s.resident_pages, s.pages_read), (1, 0, 1));
    assert_eq!(s.page_requests_wait_io, 2);
    assert!(!r.cache.inner.state.lock().policy.contains(page_id(1, 9)));
    r.cache.check();
    // A read error (EIO) likewise.
    r.fs.set_faults(Faults {
        fail_reads: true,
        ..Faults::default()
    });
    assert_eq!(r.cache.get(at(10), Intent::Read).err().unwrap().code, 1512);
    r.fs.set_faults(Faults::default());
    // Repaired (the same flip undoes it): the page reads again.
    assert!(r.fs.corrupt_byte(Path::new("/d/f1.dat"), off));
    assert_eq!(body_byte(&r.cache, 9), 5);
    r.cache.check();
}

#[test]
fn eio_on_write_keeps_the_page_dirty_and_intact() {
    let r = rig(4 * MB);
    put(&r.cache, 2, 0x42, 50);
    r.fs.set_faults(Faults {
        fail_writes: true,
        ..Faults::default()
    });
    assert_eq!(r.cache.flush_all().unwrap_err().code, 1509);
    assert_eq!(r.cache.clean_step(10).unwrap_err().code, 1509);
    let s = r.cache.stats();
    assert_eq!((s.dirty_pages, s.write_errors, s.pages_written), (1, 2, 0));
    assert_eq!(body_byte(&r.cache, 2), 0x42);
    // A dirty victim that cannot be written stays, dirty; the miss fails.
    for p in 100..227 {
        put(&r.cache, p, 1, 60);
    }
    assert_eq!(r.cache.get(at(400), Intent::Read).err().unwrap().code, 1509);
    r.cache.check();
    let s = r.cache.stats();
    assert_eq!(s.dirty_pages, 128);
    assert_eq!(s.page_requests(), 1 + 1 + 127 + 1);
    r.fs.set_faults(Faults::default());
    r.cache.flush_all().unwrap();
    assert_eq!(r.cache.stats().dirty_pages, 0);
    assert_eq!(on_disk(&r, 2)[PAGE_HEADER_BYTES], 0x42);
    assert_eq!(on_disk(&r, 226)[PAGE_HEADER_BYTES], 1);
    r.cache.check();
    // A checkpoint syncs the files it wrote; a failed sync leaves its pages dirty.
    let syncs = r.fs.stats().syncs;
    put(&r.cache, 2, 0x43, 70);
    r.fs.set_faults(Faults {
        fail_syncs: true,
        ..Faults::default()
    });
    assert_eq!(r.cache.flush_all().unwrap_err().code, 1509);
    assert_eq!(r.cache.stats().dirty_pages, 1);
    r.fs.set_faults(Faults::default());
    assert_eq!(r.cache.flush_all().unwrap(), 70);
    assert_eq!(r.fs.stats().syncs, syncs + 2);
    assert_eq!(r.cache.stats().dirty_pages, 0);
    r.cache.check();
}

#[test]
fn resize_keeps_every_dirty_change() {
    let r = rig(8 * MB);
    assert_eq!(r.cache.stats().capacity_pages, 256);
    for p in 0..200 {
        put(&r.cache, p, (p % 250) as u8 + 1, p as u64 + 1);
    }
    r.cache.resize(4 * MB).unwrap();
    let s = r.cache.stats();
    assert_eq!((s.capacity_pages, s.frames_allocated), (128, 128));
    assert!(s.resident_pages <= 128);
    assert!(s.pages_written >= 72);
    r.cache.check();
    for p in 0..200 {
        assert_eq!(body_byte(&r.cache, p), (p % 250) as u8 + 1);
    }
    // Grow back: more frames, everything fits again.
    r.cache.resize(12 * MB).unwrap();
    assert_eq!(r.cache.stats().frames_allocated, 384);
    for p in 0..300 {
        drop(r.cache.get(at(p), Intent::Read).unwrap());
    }
    assert_eq!(r.cache.stats().resident_pages, 300);
    // Shrink with pinned pages: they stay; their frames are reclaimed later.
    let pins: Vec<_> = (0..200)
        .map(|p| r.cache.get(at(p), Intent::Read).unwrap())
        .collect();
    r.cache.resize(4 * MB).unwrap();
    let s = r.cache.stats();
    assert_eq!(s.capacity_pages, 128);
    assert_eq!(s.frames_allocated, 200);
    r.cache.check();
    drop(pins);
    for p in 400..420 {
        drop(r.cache.get(at(p), Intent::Read).unwrap());
    }
    assert_eq!(r.cache.stats().frames_allocated, 128);
    r.cache.check();
    for p in 0..200 {
        assert_eq!(body_byte(&r.cache, p), (p % 250) as u8 + 1);
    }
}

#[test]
fn drop_file_discards_its_pages() {
    let r = rig(4 * MB);
    put(&r.cache, 1, 3, 10);
    drop(r.cache.get(at(2), Intent::Read).unwrap());
    {
        let _pin = r.cache.get(at(2), Intent::Read).unwrap();
        assert_eq!(r.cache.drop_file(1).unwrap_err().code, 770);
    }
    r.cache.drop_file(1).unwrap();
    let s = r.cache.stats();
    assert_eq!((s.resident_pages, s.dirty_pages), (0, 0));
    assert_eq!(r.fs.stats().writes, 0);
    assert!(r.cache.get(at(1), Intent::Read).is_err());
    assert!(r.cache.inner.state.lock().policy.is_empty());
    r.cache.check();
}

#[test]
fn format_does_not_read_and_zeroes() {
    let r = rig(4 * MB);
    put(&r.cache, 6, 0xee, 5);
    let p = r.cache.get(at(6), Intent::Format).unwrap();
    assert!(p.read(|b| b.iter().all(|&x| x == 0)));
    drop(p);
    let p = r.cache.get(at(7), Intent::Format).unwrap();
    assert!(p.read(|b| b.iter().all(|&x| x == 0)));
    drop(p);
    assert_eq!(r.file.reads.load(Ordering::SeqCst), 1);
    assert_eq!(r.cache.stats().pages_read, 1);
}

#[test]
fn correlated_rule_same_thread_same_page_in_a_row() {
    let r = rig(4 * MB);
    drop(r.cache.get(at(1), Intent::Read).unwrap());
    drop(r.cache.get(at(1), Intent::Read).unwrap()); // correlated
    drop(r.cache.get(at(2), Intent::Read).unwrap());
    drop(r.cache.get(at(1), Intent::Read).unwrap()); // not: page 2 in between
    drop(r.cache.get_with(at(1), Intent::Read, true).unwrap()); // explicit
    assert_eq!(r.cache.policy_stats().correlated_hits, 2);
}

#[test]
fn os_files_roundtrip() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("data1.dat");
    let fs = OsFileSystem;
    let f = fs.create(&path, 64 * DISK_PAGE_SIZE as u64).unwrap();
    let wal: Arc<dyn WalSync> = Arc::new(crate::disk::NoWal);
    let cfg = PageCacheConfig {
        capacity_bytes: 4 * MB,
        ..PageCacheConfig::default()
    };
    {
        let c = PageCache::new(cfg.clone(), wal.clone()).unwrap();
        c.register_file(1, f);
        put(&c, 17, 0x77, 3);
        assert_eq!(c.flush_all().unwrap(), 3);
    }
    let c = PageCache::new(cfg, wal).unwrap();
    c.register_file(1, fs.open(&path).unwrap());
    assert_eq!(body_byte(&c, 17), 0x77);
    assert_eq!(c.stats().pages_read, 1);
}

#[test]
fn advice_from_the_policy() {
    let r = rig(4 * MB);
    for k in 0..4000u32 {
        drop(r.cache.get(at(k % 200), Intent::Read).unwrap());
    }
    let a = r.cache.advice(&[4 * MB, 8 * MB]);
    assert_eq!(a.len(), 2);
    assert_eq!((a[0].0, a[1].0), (4 * MB, 8 * MB));
    assert!(a[1].1 > 90.0, "a loop of 200 pages fits in 8M: {a:?}");
    assert!(a[0].1 <= a[1].1);
}

#[test]
fn the_cleaner_writes_the_next_victims_first() {
    let mut r = rig(4 * MB);
    // Plain LIRS (the adaptive policy may run the LRU layout, where oldest-dirty is
    // already the eviction order).
    let cfg = PageCacheConfig {
        capacity_bytes: 4 * MB,
        ..PageCacheConfig::default()
    };
    let policy = crate::disk::policy::PolicyConfig::plain_lirs(128);
    r.cache = PageCache::with_policy(cfg, policy, Arc::new(RecWal(r.log.clone()))).unwrap();
    r.cache.register_file(1, r.file.clone());
    for p in 0..128 {
        put(&r.cache, p, p as u8 + 1, 10 + p as u64);
    }
    // LIRS made the first pages hot (LIR) and the last ones the resident cold queue;
    // oldest-dirty order would write pages 0 and 1, the victims are at the end.
    assert_eq!(r.cache.clean_step(2).unwrap(), 2);
    assert_eq!(r.cache.stats().dirty_pages, 126);
    let written: Vec<u32> = (0..128)
        .filter(|&p| on_disk(&r, p)[PAGE_HEADER_BYTES] == p as u8 + 1)
        .collect();
    assert_eq!(written.len(), 2, "{written:?}");
    assert!(
        written.iter().all(|&p| p >= 64),
        "cold pages first: {written:?}"
    );
    // The next misses find clean victims: nothing else is written.
    for p in 200..202 {
        drop(r.cache.get(at(p), Intent::Read).unwrap());
    }
    assert_eq!(r.cache.stats().pages_written, 2);
    r.cache.check();
}

/// Pins held over every frame with a buffer (a leaked pin keeps its frame for good).
fn pins_held(c: &PageCache) -> u32 {
    let st = c.inner.state.lock();
    (0..st.slots.len() as u32)
        .filter(|&i| st.allocated[i as usize])
        .map(|i| st.arena.get(i).pins())
        .sum()
}

#[test]
fn the_frame_arena_gives_each_index_its_own_header_for_good() {
    let a = frame::FrameArena::new();
    let n = 128 * 63 + 5; // seven chunks
    let addrs: Vec<usize> = (0..n).map(|i| a.get(i) as *const _ as usize).collect();
    let distinct: std::collections::BTreeSet<usize> = addrs.iter().copied().collect();
    assert_eq!(distinct.len(), n as usize);
    for i in (0..n).rev() {
        assert_eq!(a.get(i) as *const _ as usize, addrs[i as usize]);
    }
    let f = a.get(700);
    f.pin_locked();
    f.pin_locked();
    assert_eq!(f.pins(), 2);
    f.unpin();
    f.unpin_locked();
    assert_eq!(f.pins(), 0);
    a.install(700, frame::buffers(1).pop().unwrap());
    assert_eq!(a.get(700).data.read().len(), DISK_PAGE_SIZE);
    assert_eq!(a.take_buffer(700).len(), DISK_PAGE_SIZE);
    assert!(a.get(700).data.read().is_empty());
}

#[test]
fn every_path_gives_its_pin_back() {
    let r = rig(8 * MB);
    let a = r.cache.get(at(1), Intent::Read).unwrap();
    let b = r.cache.get(at(1), Intent::Read).unwrap();
    let w = r.cache.get(at(2), Intent::Write).unwrap();
    let f = r.cache.get(at(3), Intent::Format).unwrap();
    assert_eq!(pins_held(&r.cache), 4);
    w.set_lsn_dirty(5);
    f.set_lsn_dirty(6);
    drop((a, b, w, f));
    assert_eq!(pins_held(&r.cache), 0);
    // Write claims: the cleaner's, a checkpoint's, failed ones (finished with the
    // error, the rest abandoned).
    put(&r.cache, 4, 1, 7);
    assert_eq!(r.cache.clean_step(64).unwrap(), 3);
    put(&r.cache, 5, 1, 8);
    assert_eq!(r.cache.flush_all().unwrap(), 8);
    assert_eq!(pins_held(&r.cache), 0);
    r.fs.set_faults(Faults {
        fail_writes: true,
        ..Faults::default()
    });
    put(&r.cache, 6, 1, 9);
    put(&r.cache, 7, 1, 10);
    assert_eq!(r.cache.flush_all().unwrap_err().code, 1509);
    assert_eq!(pins_held(&r.cache), 0);
    // A failed page-in.
    r.fs.set_faults(Faults {
        fail_reads: true,
        ..Faults::default()
    });
    assert_eq!(r.cache.get(at(300), Intent::Read).err().unwrap().code, 1512);
    r.fs.set_faults(Faults::default());
    assert_eq!(pins_held(&r.cache), 0);
    // Every frame is reusable: more pages than frames pass through (dirty victims
    // written first), then a shrink gives every buffer above the size back.
    for p in 0..400 {
        drop(r.cache.get(at(p), Intent::Read).unwrap());
    }
    assert_eq!(r.cache.stats().resident_pages, 256);
    assert_eq!(pins_held(&r.cache), 0);
    r.cache.resize(4 * MB).unwrap();
    let s = r.cache.stats();
    assert_eq!((s.capacity_pages, s.frames_allocated), (128, 128));
    r.cache.check();
    assert_eq!(body_byte(&r.cache, 7), 1);
}

/// A local checkpoint writes the pages dirty when it started, not those first
/// dirtied after (they are left to the cleaner).
#[test]
fn flush_dirty_before_writes_only_the_pages_dirty_at_the_mark() {
    let r = rig(4 << 20);
    put(&r.cache, 1, 11, 10);
    put(&r.cache, 2, 22, 20);
    let mark = r.cache.dirty_mark();
    put(&r.cache, 3, 33, 30);
    put(&r.cache, 1, 12, 40); // dirty before the mark: written with its later change
    r.cache.flush_dirty_before(mark).unwrap();
    assert_eq!(on_disk(&r, 1)[PAGE_HEADER_BYTES], 12);
    assert_eq!(on_disk(&r, 2)[PAGE_HEADER_BYTES], 22);
    assert_eq!(
        on_disk(&r, 3)[PAGE_HEADER_BYTES],
        0,
        "first dirtied after the mark"
    );
    assert_eq!(r.cache.stats().dirty_pages, 1);
    r.cache.flush_all().unwrap();
    assert_eq!(on_disk(&r, 3)[PAGE_HEADER_BYTES], 33);
}
