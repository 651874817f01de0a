//! Administrative operations: dropping a data file's pages, discarding the pages of a
//! freed extent, and resizing DiskPageBufferMemory online.

use super::frame::{PENDING, State, Status, buffers, clean_evictable, unpinned_idle};
use super::{Inner, PageAddr, frames_for};
use crate::error::{Result, codes};

impl Inner {
    /// Forgets the cached pages among `pages` without writing them (their extent went
    /// back to the tablespace: nothing on them matters any more, and a later owner
    /// formats them before use). Waits for I/O in flight on them; a pinned page is an
    /// internal error (no record of a free extent can be in use).
    pub(super) fn discard_pages(&self, pages: &[PageAddr]) -> Result<usize> {
        let mut st = self.state.lock();
        loop {
            let mut busy = false;
            let mut mine = Vec::new();
            for addr in pages {
                let page = addr.id();
                match st.map.get(&page).copied() {
                    None => {}
                    Some(PENDING) => busy = true,
                    Some(i) => {
                        let s = &st.slots[i as usize];
                        if s.status != Status::Resident || s.writing {
                            busy = true;
                        } else if s.write_pins > 0 || st.arena.get(i).pins() > 0 {
                            return Err(codes::internal(format_args!(
                                "discarding page {addr:?} of a free extent while it is pinned"
                            )));
                        } else {
                            mine.push(i);
                        }
                    }
                }
            }
            if busy {
                self.cond.wait(&mut st);
                continue;
            }
            let n = mine.len();
            for i in mine {
                let page = st.slots[i as usize].page;
                st.policy.remove(page);
                st.release_frame(i);
            }
            drop(st);
            self.cond.notify_all();
            return Ok(n);
        }
    }

    pub(super) fn drop_file(&self, file_no: u32) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            let mut busy = false;
            let mut mine = Vec::new();
            for (i, s) in st.slots.iter().enumerate() {
                if s.status == Status::Free || s.addr.file_no != file_no {
                    continue;
                }
                if s.status != Status::Resident || s.writing {
                    busy = true;
                } else if s.write_pins > 0 || st.arena.get(i as u32).pins() > 0 {
                    return Err(codes::file_in_use(format_args!(
                        "disk file {file_no}: page {} is in use",
                        s.addr.page_no
                    )));
                }
                mine.push(i as u32);
            }
            busy |= st
                .map
                .iter()
                .any(|(&p, &i)| i == PENDING && (p >> 32) as u32 == file_no);
            if busy {
                self.cond.wait(&mut st);
                continue;
            }
            for i in mine {
                let page = st.slots[i as usize].page;
                st.policy.remove(page);
                st.release_frame(i);
            }
            st.files.remove(&file_no);
            drop(st);
            self.cond.notify_all();
            return Ok(());
        }
    }

    pub(super) fn resize(&self, new_capacity_bytes: u64) -> Result<()> {
        let target = frames_for(new_capacity_bytes)?;
        let _serial = self.resize_lock.lock();
        let to_add = {
            let st = self.state.lock();
            target.saturating_sub(st.frames_allocated)
        };
        let fresh = buffers(to_add);
        let mut st = self.state.lock();
        st.target_frames = target;
        st.add_frames(fresh);
        let victims = {
            let State {
                policy,
                arena,
                slots,
                map,
                ..
            } = &mut *st;
            let frames = &**arena;
            policy.resize(target, |v| {
                map.get(&v)
                    .is_some_and(|&i| i != PENDING && clean_evictable(frames, slots, i))
            })
        };
        let mut res = self.evict_pages(&mut st, &victims);
        st.trim_free();
        // Write and evict dirty pages while above the new size.
        while res.is_ok() && st.policy.len() > st.policy.capacity() {
            let victims = {
                let State {
                    policy,
                    arena,
                    slots,
                    map,
                    ..
                } = &mut *st;
                let frames = &**arena;
                policy.evict_excess(|v| {
                    map.get(&v)
                        .is_some_and(|&i| i != PENDING && unpinned_idle(frames, slots, i))
                })
            };
            if victims.is_empty() {
                break; // pinned or in flight: reclaimed when evicted later
            }
            res = self.evict_pages(&mut st, &victims);
        }
        st.trim_free();
        drop(st);
        self.cond.notify_all();
        res
    }
}
