//! The request path: hits, misses with page-in and verification, waiting for a page in
//! flight or for a free frame, and eviction of victims (writing dirty ones first).
//!
//! Request classification (`ndbinfo.diskpagebuffer`): a request that blocked on the
//! condition variable at any point counts `page_requests_wait_queue`; otherwise a hit
//! counts `page_requests_direct_return` and a miss `page_requests_wait_io` (the thread
//! does the page-in itself). Exactly one per request that reached the cache.
//!
//! Locking: the cache mutex is held for the map probe, the policy access and the pin;
//! released for the read (under the frame's exclusive lock) and for victim writes.

use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::MutexGuard;

use super::cleaner::WriteKind;
use super::frame::{PENDING, Slot, State, Status, clean_evictable, unpinned_idle};
use super::{Inner, Intent, PageAddr, PageRef};
use crate::disk::page::verify;
use crate::disk::policy::{Access, PageId};
use crate::error::{NdbError, Result, codes};

/// At most this many dirty pages a miss passed over are written by that miss.
const MISS_CLEAN_PAGES: usize = 8;

fn read_error(addr: PageAddr, e: std::io::Error) -> NdbError {
    codes::file_read_error(format_args!(
        "disk file {} page {}: {e}",
        addr.file_no, addr.page_no
    ))
}

impl Inner {
    pub(super) fn get(
        &self,
        page: PageId,
        addr: PageAddr,
        intent: Intent,
        correlated: bool,
    ) -> Result<PageRef<'_>> {
        let mut st = self.state.lock();
        let mut waited = false;
        while let Some(&i) = st.map.get(&page) {
            if i != PENDING {
                let s = &st.slots[i as usize];
                if s.status == Status::Resident && !(s.writing && intent != Intent::Read) {
                    if st.policy.access(page, correlated, |_| false) != Access::Hit {
                        return Err(codes::internal(
                            "page cache: resident page missed in the policy",
                        ));
                    }
                    if waited {
                        st.counters.wait_queue += 1;
                    } else {
                        st.counters.direct_return += 1;
                    }
                    let r = self.pin(&mut st, i, addr, intent);
                    drop(st);
                    if intent == Intent::Format {
                        r.frame.data.write().fill(0);
                    }
                    return Ok(r);
                }
            }
            waited = true;
            self.cond.wait(&mut st);
        }
        self.miss(st, page, addr, intent, correlated, waited)
    }

    /// Pins frame `i` (under the cache lock, which `st` proves).
    #[inline]
    fn pin(&self, st: &mut State, i: u32, addr: PageAddr, intent: Intent) -> PageRef<'_> {
        debug_assert!(st.allocated[i as usize], "a mapped page has a frame");
        let frame = self.arena.get(i);
        frame.pin_locked();
        if intent != Intent::Read {
            st.slots[i as usize].write_pins += 1;
        }
        PageRef {
            frame,
            inner: self,
            i,
            addr,
            intent,
        }
    }

    fn miss<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        page: PageId,
        addr: PageAddr,
        intent: Intent,
        correlated: bool,
        mut waited: bool,
    ) -> Result<PageRef<'a>> {
        let Some(file) = st.files.get(&addr.file_no).cloned() else {
            return Err(codes::bad_argument(format_args!(
                "disk file {} is not registered in the page cache",
                addr.file_no
            )));
        };
        // Dirty pages the policy passed over for a clean victim: written below (after
        // the page-in), so that they become victims again instead of holding frames
        // for good when the cleaner lags (a load followed by reads: every frame dirty).
        let mut skipped_dirty = 0usize;
        let out = {
            let State {
                policy,
                arena,
                slots,
                map,
                ..
            } = &mut *st;
            let frames = &**arena;
            policy.access(page, correlated, |v| {
                map.get(&v).is_some_and(|&i| {
                    if i == PENDING {
                        return false;
                    }
                    let clean = clean_evictable(frames, slots, i);
                    if !clean && unpinned_idle(frames, slots, i) {
                        skipped_dirty += 1;
                    }
                    clean
                })
            })
        };
        let Access::Miss { evict } = out else {
            return Err(codes::internal(
                "page cache: unmapped page hit in the policy",
            ));
        };
        if let Some(v) = evict {
            let Some(vi) = st.frame_of(v) else {
                return Err(codes::internal(
                    "page cache: the policy evicted an unmapped page",
                ));
            };
            st.release_frame(vi);
        }
        let i = match st.free.pop() {
            Some(i) => i,
            None => {
                st.map.insert(page, PENDING);
                match self.wait_for_frame(&mut st, &mut waited) {
                    Ok(i) => i,
                    Err(e) => {
                        st.map.remove(&page);
                        st.policy.remove(page);
                        if waited {
                            st.counters.wait_queue += 1;
                        } else {
                            st.counters.wait_io += 1;
                        }
                        drop(st);
                        self.cond.notify_all();
                        return Err(e);
                    }
                }
            }
        };
        st.slots[i as usize] = Slot {
            page,
            addr,
            status: Status::Loading,
            ..Slot::free()
        };
        st.map.insert(page, i);
        if waited {
            st.counters.wait_queue += 1;
        } else {
            st.counters.wait_io += 1;
        }
        let r = self.pin(&mut st, i, addr, intent);
        drop(st);

        let loaded = if intent == Intent::Format {
            r.frame.data.write().fill(0);
            Ok(0)
        } else {
            let mut data = r.frame.data.write();
            file.read_at(&mut data, addr.offset_bytes())
                .map_err(|e| read_error(addr, e))
                .and_then(|()| verify(&data, addr.file_no, addr.page_no))
                .map(|h| h.lsn)
        };

        let mut st = self.state.lock();
        let res = match loaded {
            Ok(lsn) => {
                st.set_resident(i, lsn);
                if intent != Intent::Format {
                    st.counters.pages_read += 1;
                }
                Ok(r)
            }
            Err(e) => {
                st.counters.read_errors += 1;
                st.policy.remove(page);
                // Unpin without the guard (it would take the lock again), then free.
                r.frame.unpin_locked();
                std::mem::forget(r);
                st.slots[i as usize].write_pins = 0;
                st.release_frame(i);
                Err(e)
            }
        };
        drop(st);
        self.cond.notify_all();
        if skipped_dirty > 0 && res.is_ok() {
            // The cleaner writes cold pages first: the ones skipped. A failure leaves
            // them dirty (counted); this read has its page either way.
            if self
                .clean_step(skipped_dirty.min(MISS_CLEAN_PAGES))
                .is_err()
            {
                super::stats::IoCounters::bump(&self.io.cleaner_errors);
            }
        }
        res
    }

    /// Takes a free frame, evicting (and writing if dirty) pages while the policy is over
    /// capacity, or waits for one. Called with the page pending in `map`.
    fn wait_for_frame(&self, st: &mut MutexGuard<'_, State>, waited: &mut bool) -> Result<u32> {
        self.frame_waiters.fetch_add(1, Ordering::SeqCst);
        let r = loop {
            // The `SeqCst` increment above and the `SeqCst` loads of pins released in
            // the evictability check below pair with `PageRef::drop`: either that
            // unpin is visible here, or its thread sees us waiting (see `Frame`).
            if let Some(i) = st.free.pop() {
                break Ok(i);
            }
            let victims = {
                let State {
                    policy,
                    arena,
                    slots,
                    map,
                    ..
                } = &mut **st;
                let frames = &**arena;
                policy.evict_excess(|v| {
                    map.get(&v)
                        .is_some_and(|&i| i != PENDING && unpinned_idle(frames, slots, i))
                })
            };
            if victims.is_empty() {
                *waited = true;
                // The timeout is only a safety net; wake-ups come from unpins and frees.
                self.cond.wait_for(st, Duration::from_millis(50));
                continue;
            }
            if let Err(e) = self.evict_pages(st, &victims) {
                break Err(e);
            }
        };
        self.frame_waiters.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Frees the frames of `victims` (just evicted from the policy): clean ones at once,
    /// dirty ones after writing them (without the lock). A victim whose write fails
    /// returns to the policy, dirty; the first error is returned.
    pub(super) fn evict_pages(
        &self,
        st: &mut MutexGuard<'_, State>,
        victims: &[PageId],
    ) -> Result<()> {
        let mut claims = Vec::new();
        for &v in victims {
            let Some(i) = st.frame_of(v) else {
                return Err(codes::internal("page cache: evicted page is not mapped"));
            };
            if st.slots[i as usize].dirty_seq.is_none() {
                st.release_frame(i);
            } else {
                match self.claim(st, i) {
                    Some(c) => {
                        st.slots[i as usize].status = Status::Evicting;
                        claims.push(c);
                    }
                    None => {
                        // No file to write to (cannot happen: drop_file discards pages
                        // before unregistering). Keep the page.
                        st.policy.access(v, true, |_| false);
                    }
                }
            }
        }
        let mut first_err = None;
        for c in claims {
            let res = MutexGuard::unlocked(st, || self.write_claimed(&c));
            if let Err(e) = self.finish(st, c, res, WriteKind::Evict) {
                first_err.get_or_insert(e);
            }
        }
        self.cond.notify_all();
        first_err.map_or(Ok(()), Err)
    }
}
