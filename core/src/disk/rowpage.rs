//! The disk row page: a slotted page holding the disk parts of rows.
//!
//! A data page of a data file (`PageKind::Data`) keeps the common 32-byte page header
//! (`disk::page`, sealed by the page cache on write) and, in its body, a small row-page
//! header, the records growing upwards from [`RECORDS_START`] and a slot directory
//! growing downwards from the end of the page. A record takes exactly its length (plus a
//! 4-byte slot entry), so a VARCHAR(512) holding 10 bytes takes about 10 bytes on disk
//! (NDB stores disk columns at their maximum size).
//!
//! ```text
//! offset size  field
//!      0   32  common page header (disk::page)
//!     32    2  slot_count: entries in the slot directory (live or free)
//!     34    2  live_records
//!     36    2  records_end: offset of the first byte after the last record
//!     38    2  garbage_bytes: bytes below records_end no live record uses
//!     40    8  reserved (zero)
//!     48       records ... | free space | slot directory
//! 32768 - 4*(i+1)  slot i: u16 offset, u16 length (offset 0 = free slot)
//! ```
//!
//! Invariants (checked by [`check`]): `RECORDS_START <= records_end <= dir_start`
//! where `dir_start = DISK_PAGE_SIZE - 4 * slot_count`; every live slot lies inside
//! `RECORDS_START..records_end`; live records do not overlap; the sum of live lengths
//! plus `garbage_bytes` equals `records_end - RECORDS_START`; the last slot is live
//! (trailing free slots are dropped from the directory). A zero-length record points at
//! `RECORDS_START` and occupies no bytes.
//!
//! Slot numbers are stable: a record keeps its slot from insert to delete, whatever
//! moves (update, compaction) happen inside the page, because the in-memory row keeps
//! `(file_no, page_no, slot)` as its disk reference. A free slot is reused by the next
//! insert (lowest first).
//!
//! Space: [`free_bytes`] is all space not used by live records or slot entries
//! (contiguous gap plus garbage). An insert of `n` bytes succeeds whenever
//! `n + SLOT_BYTES <= free_bytes(page)` (compacting the page if needed); the largest
//! record is [`MAX_RECORD_BYTES`] (one record alone on a page).
//!
//! These functions do not panic on a structurally damaged page (every offset is
//! bounds-checked); pages are checksummed on read, so damage means a bug, found by
//! [`check`].

use super::page::{DISK_PAGE_SIZE, PAGE_HEADER_BYTES};

/// First byte of the record area.
pub const RECORDS_START: usize = PAGE_HEADER_BYTES + 16;
/// Bytes of one slot directory entry.
pub const SLOT_BYTES: usize = 4;
/// Free bytes of an empty, initialised page.
pub const EMPTY_PAGE_FREE_BYTES: usize = DISK_PAGE_SIZE - RECORDS_START;
/// Largest record: alone on a page with its slot entry.
pub const MAX_RECORD_BYTES: usize = EMPTY_PAGE_FREE_BYTES - SLOT_BYTES;

const OFF_SLOT_COUNT: usize = PAGE_HEADER_BYTES;
const OFF_LIVE: usize = PAGE_HEADER_BYTES + 2;
const OFF_RECORDS_END: usize = PAGE_HEADER_BYTES + 4;
const OFF_GARBAGE: usize = PAGE_HEADER_BYTES + 6;

/// Space a record of `len` bytes needs on a page (record plus slot entry).
pub fn space_needed(len: usize) -> usize {
    len + SLOT_BYTES
}

fn rd(page: &[u8], off: usize) -> usize {
    match page.get(off..off + 2) {
        Some(b) => u16::from_le_bytes([b[0], b[1]]) as usize,
        None => 0,
    }
}

fn wr(page: &mut [u8], off: usize, v: usize) {
    debug_assert!(v <= u16::MAX as usize);
    page[off..off + 2].copy_from_slice(&(v as u16).to_le_bytes());
}

fn slot_pos(slot: usize) -> usize {
    DISK_PAGE_SIZE - SLOT_BYTES * (slot + 1)
}

fn slot_count(page: &[u8]) -> usize {
    rd(page, OFF_SLOT_COUNT)
}

fn dir_start(page: &[u8]) -> usize {
    DISK_PAGE_SIZE.saturating_sub(SLOT_BYTES * slot_count(page))
}

/// (offset, len) of a slot; offset 0 means free.
fn slot(page: &[u8], slot: usize) -> (usize, usize) {
    let p = slot_pos(slot);
    (rd(page, p), rd(page, p + 2))
}

fn set_slot(page: &mut [u8], slot: usize, off: usize, len: usize) {
    let p = slot_pos(slot);
    wr(page, p, off);
    wr(page, p + 2, len);
}

fn records_end(page: &[u8]) -> usize {
    rd(page, OFF_RECORDS_END)
}

fn garbage(page: &[u8]) -> usize {
    rd(page, OFF_GARBAGE)
}

/// Contiguous free gap between the records and the slot directory.
fn gap(page: &[u8]) -> usize {
    dir_start(page).saturating_sub(records_end(page))
}

/// Cheap sanity check of the row-page header, done before every access so that a
/// damaged page gives `None`/`false`, never an out-of-bounds index.
fn header_ok(page: &[u8]) -> bool {
    if page.len() != DISK_PAGE_SIZE {
        return false;
    }
    let n = slot_count(page);
    if SLOT_BYTES * n > DISK_PAGE_SIZE - RECORDS_START {
        return false;
    }
    let end = records_end(page);
    (RECORDS_START..=dir_start(page)).contains(&end) && garbage(page) <= end - RECORDS_START
}

/// Format an empty row page (the common header is left to the page cache's `seal`).
pub fn init(page: &mut [u8]) {
    assert_eq!(page.len(), DISK_PAGE_SIZE, "disk page size");
    page[PAGE_HEADER_BYTES..].fill(0);
    wr(page, OFF_RECORDS_END, RECORDS_START);
}

/// Usable bytes for new records including their slot entries.
pub fn free_bytes(page: &[u8]) -> usize {
    gap(page) + garbage(page)
}

/// Number of live records.
pub fn live_records(page: &[u8]) -> usize {
    rd(page, OFF_LIVE)
}

/// The record in `slot`, if live.
pub fn get(page: &[u8], slot_no: u16) -> Option<&[u8]> {
    let s = slot_no as usize;
    if !header_ok(page) || s >= slot_count(page) {
        return None;
    }
    let (off, len) = slot(page, s);
    if off == 0 {
        return None;
    }
    page.get(off..off + len)
}

/// Whether the page was formatted as a row page (a page never written is all zeros).
pub fn formatted(page: &[u8]) -> bool {
    header_ok(page)
}

/// Every live record with its slot, in slot order (empty for an unformatted page).
pub fn records(page: &[u8]) -> Vec<(u16, &[u8])> {
    if !header_ok(page) {
        return Vec::new();
    }
    (0..slot_count(page))
        .filter_map(|s| {
            let s = u16::try_from(s).ok()?;
            get(page, s).map(|r| (s, r))
        })
        .collect()
}

/// Move every live record down to `RECORDS_START`, removing the garbage.
fn compact(page: &mut [u8]) {
    let n = slot_count(page);
    let mut live: Vec<(usize, usize)> = (0..n)
        .filter_map(|s| {
            let (off, _) = slot(page, s);
            (off != 0).then_some((off, s))
        })
        .collect();
    live.sort_unstable();
    let mut dst = RECORDS_START;
    for (off, s) in live {
        let (_, len) = slot(page, s);
        if len == 0 {
            continue; // zero-length records stay at RECORDS_START
        }
        if off + len > page.len() || dst > off {
            return; // damaged page: leave it to check()
        }
        page.copy_within(off..off + len, dst);
        set_slot(page, s, dst, len);
        dst += len;
    }
    wr(page, OFF_RECORDS_END, dst);
    wr(page, OFF_GARBAGE, 0);
}

/// Append `bytes` at records_end (the caller made sure the gap is large enough).
/// A zero-length record points at `RECORDS_START` and occupies nothing.
fn append(page: &mut [u8], slot_no: usize, bytes: &[u8]) {
    if bytes.is_empty() {
        set_slot(page, slot_no, RECORDS_START, 0);
        return;
    }
    let at = records_end(page);
    page[at..at + bytes.len()].copy_from_slice(bytes);
    set_slot(page, slot_no, at, bytes.len());
    wr(page, OFF_RECORDS_END, at + bytes.len());
}

/// Insert a record; `None` if it does not fit. Reuses the lowest free slot.
pub fn insert(page: &mut [u8], bytes: &[u8]) -> Option<u16> {
    if bytes.len() > MAX_RECORD_BYTES || !header_ok(page) {
        return None;
    }
    let n = slot_count(page);
    let free_slot = (0..n).find(|&s| slot(page, s).0 == 0);
    let dir_cost = if free_slot.is_some() { 0 } else { SLOT_BYTES };
    if bytes.len() + dir_cost > free_bytes(page) {
        return None;
    }
    if bytes.len() + dir_cost > gap(page) {
        compact(page);
        if bytes.len() + dir_cost > gap(page) {
            return None; // damaged accounting
        }
    }
    let s = match free_slot {
        Some(s) => s,
        None => {
            wr(page, OFF_SLOT_COUNT, n + 1);
            n
        }
    };
    append(page, s, bytes);
    wr(page, OFF_LIVE, live_records(page) + 1);
    u16::try_from(s).ok()
}

/// Replace the record in `slot` (in place, at the end of the records, or after
/// compacting). False if the slot is not live or the new record does not fit; the
/// page is then unchanged.
pub fn update(page: &mut [u8], slot_no: u16, bytes: &[u8]) -> bool {
    let s = slot_no as usize;
    if !header_ok(page) || s >= slot_count(page) || bytes.len() > MAX_RECORD_BYTES {
        return false;
    }
    let (off, old_len) = slot(page, s);
    if off == 0 || off + old_len > DISK_PAGE_SIZE {
        return false;
    }
    let new_len = bytes.len();
    if new_len <= old_len {
        page[off..off + new_len].copy_from_slice(bytes);
        let new_off = if new_len == 0 { RECORDS_START } else { off };
        set_slot(page, s, new_off, new_len);
        if off + old_len == records_end(page) {
            wr(page, OFF_RECORDS_END, off + new_len);
        } else {
            wr(page, OFF_GARBAGE, garbage(page) + old_len - new_len);
        }
        return true;
    }
    if off + old_len == records_end(page) && new_len - old_len <= gap(page) {
        page[off..off + new_len].copy_from_slice(bytes);
        set_slot(page, s, off, new_len);
        wr(page, OFF_RECORDS_END, off + new_len);
        return true;
    }
    if new_len > free_bytes(page) + old_len {
        return false;
    }
    // Retire the old copy, then append (compacting first if the gap is too small).
    set_slot(page, s, 0, 0);
    wr(page, OFF_GARBAGE, garbage(page) + old_len);
    if new_len > gap(page) {
        compact(page);
        if new_len > gap(page) {
            return false; // damaged accounting (check() says why)
        }
    }
    append(page, s, bytes);
    true
}

/// Delete the record in `slot`; false if it was not live. Trailing free slots leave
/// the directory so their space returns to the page.
pub fn delete(page: &mut [u8], slot_no: u16) -> bool {
    let s = slot_no as usize;
    let n = slot_count(page);
    if !header_ok(page) || s >= n {
        return false;
    }
    let (off, len) = slot(page, s);
    if off == 0 {
        return false;
    }
    set_slot(page, s, 0, 0);
    if off + len == records_end(page) {
        wr(page, OFF_RECORDS_END, off);
    } else {
        wr(page, OFF_GARBAGE, garbage(page) + len);
    }
    wr(page, OFF_LIVE, live_records(page).saturating_sub(1));
    let mut m = n;
    while m > 0 && slot(page, m - 1).0 == 0 {
        m -= 1;
    }
    wr(page, OFF_SLOT_COUNT, m);
    if m == 0 {
        // Empty page: reclaim everything (garbage included).
        wr(page, OFF_RECORDS_END, RECORDS_START);
        wr(page, OFF_GARBAGE, 0);
    }
    true
}

/// Undo at a restart: make `slot` hold exactly `bytes` (replacing a live record,
/// reusing a free slot, or growing the directory up to it), formatting a page that
/// was never written. Absolute, so applying it twice is applying it once. False if the
/// record does not fit; the page is then unchanged.
pub fn put_at(page: &mut [u8], slot_no: u16, bytes: &[u8]) -> bool {
    if page.len() != DISK_PAGE_SIZE || bytes.len() > MAX_RECORD_BYTES {
        return false;
    }
    if !header_ok(page) {
        init(page);
    }
    let s = slot_no as usize;
    let n = slot_count(page);
    if s < n && slot(page, s).0 != 0 {
        return update(page, slot_no, bytes);
    }
    let dir_cost = if s < n { 0 } else { (s + 1 - n) * SLOT_BYTES };
    if bytes.len() + dir_cost > free_bytes(page) {
        return false;
    }
    if bytes.len() + dir_cost > gap(page) {
        compact(page);
        if bytes.len() + dir_cost > gap(page) {
            return false; // damaged accounting
        }
    }
    if s >= n {
        for i in n..s {
            set_slot(page, i, 0, 0);
        }
        wr(page, OFF_SLOT_COUNT, s + 1);
    }
    append(page, s, bytes);
    wr(page, OFF_LIVE, live_records(page) + 1);
    true
}

/// Validate the structure; `Err` names the first violated invariant.
pub fn check(page: &[u8]) -> Result<(), String> {
    if page.len() != DISK_PAGE_SIZE {
        return Err(format!("page is {} bytes", page.len()));
    }
    let n = slot_count(page);
    let dir = DISK_PAGE_SIZE
        .checked_sub(SLOT_BYTES * n)
        .filter(|&d| d >= RECORDS_START)
        .ok_or_else(|| format!("slot_count {n} too large"))?;
    let end = records_end(page);
    if !(RECORDS_START..=dir).contains(&end) {
        return Err(format!("records_end {end} outside {RECORDS_START}..={dir}"));
    }
    let mut live: Vec<(usize, usize, usize)> = Vec::new();
    for s in 0..n {
        let (off, len) = slot(page, s);
        if off == 0 {
            continue;
        }
        if off < RECORDS_START || off + len > end {
            return Err(format!("slot {s} at {off}+{len} outside the records"));
        }
        live.push((off, len, s));
    }
    if n > 0 && slot(page, n - 1).0 == 0 {
        return Err("trailing free slot".into());
    }
    if live.len() != live_records(page) {
        return Err(format!(
            "live_records {} but {} live slots",
            live_records(page),
            live.len()
        ));
    }
    live.retain(|l| l.1 > 0); // zero-length records occupy nothing
    live.sort_unstable();
    for w in live.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            return Err(format!("slots {} and {} overlap", w[0].2, w[1].2));
        }
    }
    let used: usize = live.iter().map(|l| l.1).sum();
    if used + garbage(page) != end - RECORDS_START {
        return Err(format!(
            "live bytes {used} + garbage {} != record area {}",
            garbage(page),
            end - RECORDS_START
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn page() -> Vec<u8> {
        let mut p = vec![0u8; DISK_PAGE_SIZE];
        init(&mut p);
        p
    }

    #[test]
    fn put_at_sets_a_slot_absolutely_and_twice_is_once() {
        // An unformatted (never written) page is formatted first.
        let mut p = vec![0u8; DISK_PAGE_SIZE];
        assert!(put_at(&mut p, 3, b"third"));
        check(&p).unwrap();
        assert_eq!(live_records(&p), 1);
        assert_eq!(get(&p, 3), Some(&b"third"[..]));
        assert_eq!(get(&p, 0), None, "slots below are free");
        // Replacing a live record, longer then shorter; then once more: same page.
        assert!(put_at(&mut p, 3, b"third, longer"));
        assert!(put_at(&mut p, 0, b"zero"));
        assert!(put_at(&mut p, 3, b"3"));
        let once = p.clone();
        assert!(put_at(&mut p, 3, b"3"));
        assert_eq!(p, once);
        check(&p).unwrap();
        assert_eq!(live_records(&p), 2);
        // The next insert takes the lowest free slot.
        assert_eq!(insert(&mut p, b"one"), Some(1));
        // Too large for what is left: false, page unchanged.
        let before = p.clone();
        assert!(!put_at(&mut p, 9, &vec![1u8; MAX_RECORD_BYTES]));
        assert_eq!(p, before);
    }

    #[test]
    fn small_varchar_takes_its_length() {
        let mut p = page();
        assert_eq!(free_bytes(&p), EMPTY_PAGE_FREE_BYTES);
        let s = insert(&mut p, b"ten bytes!").unwrap();
        assert_eq!(free_bytes(&p), EMPTY_PAGE_FREE_BYTES - space_needed(10));
        assert_eq!(get(&p, s), Some(&b"ten bytes!"[..]));
        // 10-byte records: a page holds (32720 / 14) of them.
        let mut n = 1;
        while insert(&mut p, b"0123456789").is_some() {
            n += 1;
        }
        assert_eq!(n, EMPTY_PAGE_FREE_BYTES / space_needed(10));
        check(&p).unwrap();
    }

    #[test]
    fn max_record_fits_alone() {
        let mut p = page();
        let big = vec![7u8; MAX_RECORD_BYTES];
        assert!(insert(&mut p, &vec![0u8; MAX_RECORD_BYTES + 1]).is_none());
        let s = insert(&mut p, &big).unwrap();
        assert_eq!(free_bytes(&p), 0);
        assert!(insert(&mut p, b"").is_none());
        assert!(delete(&mut p, s));
        assert_eq!(free_bytes(&p), EMPTY_PAGE_FREE_BYTES);
        check(&p).unwrap();
    }

    #[test]
    fn slots_stable_and_reused() {
        let mut p = page();
        let a = insert(&mut p, b"aaaa").unwrap();
        let b = insert(&mut p, b"bbbb").unwrap();
        let c = insert(&mut p, b"cccc").unwrap();
        assert_eq!((a, b, c), (0, 1, 2));
        assert!(delete(&mut p, b));
        assert!(!delete(&mut p, b));
        assert_eq!(get(&p, b), None);
        assert!(update(&mut p, a, &[b'x'; 100]));
        assert_eq!(get(&p, c), Some(&b"cccc"[..]));
        assert_eq!(insert(&mut p, b"dd"), Some(1));
        assert_eq!(live_records(&p), 3);
        check(&p).unwrap();
    }

    #[test]
    fn update_compacts_when_needed() {
        let mut p = page();
        let half = EMPTY_PAGE_FREE_BYTES / 2 - 8;
        let a = insert(&mut p, &vec![1u8; half]).unwrap();
        let b = insert(&mut p, &[2u8; 10]).unwrap();
        assert!(update(&mut p, a, &[3u8; 100])); // shrinks: garbage
        // b grows beyond the gap: needs compaction.
        assert!(update(&mut p, b, &vec![4u8; half + 500]));
        check(&p).unwrap();
        assert_eq!(get(&p, a).unwrap(), &vec![3u8; 100][..]);
        assert_eq!(get(&p, b).unwrap(), &vec![4u8; half + 500][..]);
        assert!(!update(&mut p, b, &vec![5u8; MAX_RECORD_BYTES]));
        assert_eq!(get(&p, b).unwrap(), &vec![4u8; half + 500][..]);
    }

    #[test]
    fn damaged_pages_do_not_panic() {
        let mut p = page();
        for i in 0..50u8 {
            insert(&mut p, &[i; 37]).unwrap();
        }
        delete(&mut p, 3);
        for off in [
            32usize,
            33,
            36,
            37,
            38,
            39,
            DISK_PAGE_SIZE - 4,
            DISK_PAGE_SIZE - 3,
        ] {
            for v in [0u8, 0x7f, 0xff] {
                let mut q = p.clone();
                q[off] = v;
                let _ = check(&q);
                let _ = get(&q, 0);
                let _ = insert(&mut q, &[1; 100]);
                let _ = update(&mut q, 0, &[2; 3000]);
                let _ = delete(&mut q, 1);
                let _ = free_bytes(&q);
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(usize, u8),
        Update(usize, usize, u8),
        Delete(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let len = prop_oneof![0usize..64, 0usize..3000, 0usize..MAX_RECORD_BYTES + 2];
        prop_oneof![
            (len.clone(), any::<u8>()).prop_map(|(l, b)| Op::Insert(l, b)),
            (any::<usize>(), len, any::<u8>()).prop_map(|(s, l, b)| Op::Update(s, l, b)),
            any::<usize>().prop_map(Op::Delete),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn matches_model(ops in proptest::collection::vec(op(), 1..200)) {
            let mut p = page();
            let mut model: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
            for o in ops {
                // Exact space model: live bytes + one slot entry per directory slot.
                let dir_slots = model.keys().next_back().map_or(0, |&s| s as usize + 1);
                let used: usize = model.values().map(|v| v.len()).sum();
                let model_free = EMPTY_PAGE_FREE_BYTES - used - SLOT_BYTES * dir_slots;
                prop_assert_eq!(free_bytes(&p), model_free);
                match o {
                    Op::Insert(len, b) => {
                        let rec = vec![b; len];
                        let fits = len + SLOT_BYTES <= model_free;
                        match insert(&mut p, &rec) {
                            Some(s) => {
                                let expect = (0u16..).find(|k| !model.contains_key(k)).unwrap();
                                prop_assert_eq!(s, expect);
                                model.insert(s, rec);
                            }
                            None => prop_assert!(!fits, "insert of {} refused", len),
                        }
                    }
                    Op::Update(k, len, b) => {
                        let keys: Vec<u16> = model.keys().copied().collect();
                        if keys.is_empty() { continue; }
                        let s = keys[k % keys.len()];
                        let rec = vec![b; len];
                        let fits = len <= model_free + model[&s].len();
                        prop_assert_eq!(update(&mut p, s, &rec), fits);
                        if fits { model.insert(s, rec); }
                    }
                    Op::Delete(k) => {
                        let keys: Vec<u16> = model.keys().copied().collect();
                        if keys.is_empty() { continue; }
                        let s = keys[k % keys.len()];
                        prop_assert!(delete(&mut p, s));
                        model.remove(&s);
                    }
                }
                prop_assert_eq!(check(&p), Ok(()));
                prop_assert_eq!(live_records(&p), model.len());
                for (s, v) in &model {
                    prop_assert_eq!(get(&p, *s), Some(&v[..]));
                }
            }
        }
    }
}
