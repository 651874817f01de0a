//! Fixed-size slots carved from DataMemory pages: the allocator under the hash index's
//! overflow containers and the ordered index's tree nodes.
//!
//! Layout: a [`Slab`] owns a set of pool pages, each cut into `PAGE_SIZE / slot_size`
//! equal slots (`slot_size` a power of two dividing the page, at least 8 bytes). A slot is
//! named by a `u32` id, `page_index << shift | slot`, where `page_index` indexes
//! `Slab::pages` (vacated indexes are reused) and `1 << shift` is the number of slots per
//! page. A free slot holds, in its first 4 bytes, the index of the next free slot of the
//! same page (or `NO_SLOT`) and, in the next 4 bytes, [`FREE_MARK`]; the owner of an
//! allocated slot may store anything in it.
//!
//! Invariants (checked by `check`, asserted on alloc and free):
//! - `free_slots` is the sum of the per-page free counts; every page's free list holds
//!   exactly its `free` slots, each carrying `FREE_MARK`;
//! - a page is in `with_free` (at position `list_pos`) iff it has a free slot and is not
//!   being evacuated (`no_alloc`);
//! - a page is in `empties` iff `in_empties`; candidates are re-validated when used.
//!
//! Pages go back to the pool only through [`Slab::release_empty`] (and `free_all`), which
//! the owners call at the end of every operation that holds the pool, so a page is
//! returned as soon as it holds no slot — unless the owner asks to keep free slots
//! (the ordered index's reservation stock).

use crate::storage::pool::{PAGE_SIZE, PageBox, PageKind, PagePool};

/// Written into the second word of every free slot.
pub(crate) const FREE_MARK: u32 = 0xF4EE_51A8;
/// End of a page's free list.
const NO_SLOT: u32 = u32::MAX;
/// `list_pos` of a page that is not in `with_free`.
const NOT_LISTED: u32 = u32::MAX;
/// The id that is never handed out (owners use it as "no slot").
pub(crate) const NIL: u32 = u32::MAX;

struct SlabPage {
    page: PageBox,
    /// Number of free slots.
    free: u32,
    /// First free slot, or `NO_SLOT`.
    head: u32,
    /// Position in `Slab::with_free`, or `NOT_LISTED`.
    list_pos: u32,
    /// Whether the page index is in `Slab::empties`.
    in_empties: bool,
    /// Set while the page is being evacuated: it must not receive allocations.
    no_alloc: bool,
}

pub(crate) struct Slab {
    kind: PageKind,
    slot_size: usize,
    shift: u32,
    pages: Vec<Option<SlabPage>>,
    /// Indexes of `None` entries of `pages`.
    vacant: Vec<u32>,
    /// Pages with at least one free slot (allocation candidates), most recent last.
    with_free: Vec<u32>,
    /// Pages that were seen completely free (release candidates).
    empties: Vec<u32>,
    free_slots: u64,
    held: u32,
}

impl Slab {
    pub(crate) fn new(kind: PageKind, slot_size: usize) -> Slab {
        assert!(slot_size.is_power_of_two() && (8..=PAGE_SIZE).contains(&slot_size));
        let per_page = PAGE_SIZE / slot_size;
        Slab {
            kind,
            slot_size,
            shift: per_page.trailing_zeros(),
            pages: Vec::new(),
            vacant: Vec::new(),
            with_free: Vec::new(),
            empties: Vec::new(),
            free_slots: 0,
            held: 0,
        }
    }

    #[inline]
    pub(crate) fn slots_per_page(&self) -> u32 {
        1 << self.shift
    }

    /// Pages currently held.
    #[inline]
    pub(crate) fn pages_held(&self) -> u32 {
        self.held
    }

    #[inline]
    pub(crate) fn free_slots(&self) -> u64 {
        self.free_slots
    }

    #[inline]
    pub(crate) fn used_slots(&self) -> u64 {
        u64::from(self.held) * u64::from(self.slots_per_page()) - self.free_slots
    }

    #[inline]
    fn split_id(&self, id: u32) -> (usize, usize) {
        (
            (id >> self.shift) as usize,
            ((id & (self.slots_per_page() - 1)) as usize) * self.slot_size,
        )
    }

    /// The bytes of slot `id`.
    #[inline]
    pub(crate) fn slot(&self, id: u32) -> &[u8] {
        let (p, off) = self.split_id(id);
        match self.pages.get(p) {
            Some(Some(sp)) => &sp.page.0[off..off + self.slot_size],
            _ => panic!("slab: slot {id:#x} on a page that is not held"),
        }
    }

    /// The bytes of slot `id`, mutable.
    #[inline]
    pub(crate) fn slot_mut(&mut self, id: u32) -> &mut [u8] {
        let (p, off) = self.split_id(id);
        let size = self.slot_size;
        match self.pages.get_mut(p) {
            Some(Some(sp)) => &mut sp.page.0[off..off + size],
            _ => panic!("slab: slot {id:#x} on a page that is not held"),
        }
    }

    /// Takes a free slot from the pages already held, or `None`.
    pub(crate) fn alloc(&mut self) -> Option<u32> {
        let pi = *self.with_free.last()?;
        let shift = self.shift;
        let slot_size = self.slot_size;
        let sp = self.pages[pi as usize]
            .as_mut()
            .expect("slab: listed page not held");
        assert!(
            sp.free > 0 && sp.head != NO_SLOT && !sp.no_alloc,
            "slab: listed page has no free slot"
        );
        let slot = sp.head;
        let off = slot as usize * slot_size;
        assert_eq!(
            sp.page.u32_at(off + 4),
            FREE_MARK,
            "slab: free slot lost its mark"
        );
        sp.head = sp.page.u32_at(off);
        sp.page.set_u32_at(off + 4, 0);
        sp.free -= 1;
        let now_full = sp.free == 0;
        self.free_slots -= 1;
        if now_full {
            self.unlist(pi);
        }
        Some((pi << shift) | slot)
    }

    /// Adds one page from the pool, all of its slots free. False when the pool is empty
    /// (or the id space is exhausted).
    pub(crate) fn grow(&mut self, pool: &PagePool) -> bool {
        let pi = match self.vacant.last() {
            Some(&pi) => pi,
            None => {
                let pi = self.pages.len() as u64;
                // Keep every id below NIL.
                if pi + 1 >= (1u64 << (32 - self.shift)) {
                    return false;
                }
                pi as u32
            }
        };
        let Some(mut page) = pool.alloc(self.kind) else {
            return false;
        };
        let per = self.slots_per_page();
        for s in 0..per {
            let off = s as usize * self.slot_size;
            page.set_u32_at(off, if s + 1 < per { s + 1 } else { NO_SLOT });
            page.set_u32_at(off + 4, FREE_MARK);
        }
        let sp = SlabPage {
            page,
            free: per,
            head: 0,
            list_pos: NOT_LISTED,
            in_empties: false,
            no_alloc: false,
        };
        if self.vacant.last() == Some(&pi) {
            self.vacant.pop();
            self.pages[pi as usize] = Some(sp);
        } else {
            self.pages.push(Some(sp));
        }
        self.held += 1;
        self.free_slots += u64::from(per);
        self.list(pi);
        self.note_empty(pi);
        true
    }

    /// Returns slot `id` to its page's free list (the page stays held).
    pub(crate) fn free(&mut self, id: u32) {
        let (p, off) = self.split_id(id);
        let per = self.slots_per_page();
        let sp = match self.pages.get_mut(p) {
            Some(Some(sp)) => sp,
            _ => panic!("slab: free of slot {id:#x} on a page that is not held"),
        };
        assert!(
            sp.free < per,
            "slab: free of slot {id:#x} on a page with no used slot"
        );
        sp.page.set_u32_at(off, sp.head);
        sp.page.set_u32_at(off + 4, FREE_MARK);
        sp.head = (off / self.slot_size) as u32;
        sp.free += 1;
        let (listed, no_alloc, empty) = (sp.list_pos != NOT_LISTED, sp.no_alloc, sp.free == per);
        self.free_slots += 1;
        if !listed && !no_alloc {
            self.list(p as u32);
        }
        if empty {
            self.note_empty(p as u32);
        }
    }

    fn list(&mut self, pi: u32) {
        let pos = self.with_free.len() as u32;
        let sp = self.pages[pi as usize]
            .as_mut()
            .expect("slab: list of a page not held");
        assert_eq!(sp.list_pos, NOT_LISTED);
        sp.list_pos = pos;
        self.with_free.push(pi);
    }

    fn unlist(&mut self, pi: u32) {
        let sp = self.pages[pi as usize]
            .as_mut()
            .expect("slab: unlist of a page not held");
        let pos = sp.list_pos;
        if pos == NOT_LISTED {
            return;
        }
        sp.list_pos = NOT_LISTED;
        self.with_free.swap_remove(pos as usize);
        if let Some(&moved) = self.with_free.get(pos as usize) {
            self.pages[moved as usize]
                .as_mut()
                .expect("slab: listed page not held")
                .list_pos = pos;
        }
    }

    fn note_empty(&mut self, pi: u32) {
        let sp = self.pages[pi as usize]
            .as_mut()
            .expect("slab: page not held");
        if !sp.in_empties {
            sp.in_empties = true;
            self.empties.push(pi);
        }
    }

    /// Returns completely free pages to the pool, as long as at least `keep` free slots
    /// remain afterwards. Returns the number of pages released.
    pub(crate) fn release_empty(&mut self, pool: &PagePool, keep: u64) -> u32 {
        let per = u64::from(self.slots_per_page());
        let mut released = 0;
        let mut i = 0;
        while i < self.empties.len() {
            let pi = self.empties[i];
            let sp = self.pages[pi as usize]
                .as_ref()
                .expect("slab: empty candidate not held");
            if sp.free as u64 != per {
                // No longer empty: drop the candidate.
                self.pages[pi as usize].as_mut().expect("held").in_empties = false;
                self.empties.swap_remove(i);
                continue;
            }
            if self.free_slots < keep + per {
                i += 1;
                continue;
            }
            self.empties.swap_remove(i);
            self.unlist(pi);
            let sp = self.pages[pi as usize].take().expect("held");
            pool.free(self.kind, sp.page);
            self.vacant.push(pi);
            self.held -= 1;
            self.free_slots -= per;
            released += 1;
        }
        released
    }

    /// Whether some page is completely free.
    pub(crate) fn has_empty_page(&self) -> bool {
        let per = self.slots_per_page();
        self.empties.iter().any(|&pi| {
            self.pages[pi as usize]
                .as_ref()
                .is_some_and(|sp| sp.free == per)
        })
    }

    /// The held page with the fewest used slots among pages that have some, or `None`.
    pub(crate) fn emptiest_page(&self) -> Option<u32> {
        let per = self.slots_per_page();
        let mut best: Option<(u32, u32)> = None;
        for (pi, sp) in self.pages.iter().enumerate() {
            if let Some(sp) = sp
                && sp.free < per
                && best.is_none_or(|(_, f)| sp.free > f)
            {
                best = Some((pi as u32, sp.free));
            }
        }
        best.map(|(pi, _)| pi)
    }

    /// Starts evacuating page `pi`: it receives no allocation until `end_evacuation`.
    /// Returns the ids of its used slots.
    pub(crate) fn begin_evacuation(&mut self, pi: u32) -> Vec<u32> {
        self.unlist(pi);
        let per = self.slots_per_page();
        let shift = self.shift;
        let slot_size = self.slot_size;
        let sp = self.pages[pi as usize]
            .as_mut()
            .expect("slab: evacuation of a page not held");
        sp.no_alloc = true;
        let mut is_free = vec![false; per as usize];
        let mut s = sp.head;
        for _ in 0..sp.free {
            is_free[s as usize] = true;
            s = sp.page.u32_at(s as usize * slot_size);
        }
        assert_eq!(s, NO_SLOT, "slab: free list longer than the free count");
        (0..per)
            .filter(|&s| !is_free[s as usize])
            .map(|s| (pi << shift) | s)
            .collect()
    }

    pub(crate) fn end_evacuation(&mut self, pi: u32) {
        let sp = self.pages[pi as usize]
            .as_mut()
            .expect("slab: evacuation of a page not held");
        sp.no_alloc = false;
        if sp.free > 0 {
            self.list(pi);
        }
    }

    /// Every page back to the pool.
    pub(crate) fn free_all(&mut self, pool: &PagePool) {
        for sp in self.pages.drain(..).flatten() {
            pool.free(self.kind, sp.page);
        }
        self.vacant.clear();
        self.with_free.clear();
        self.empties.clear();
        self.free_slots = 0;
        self.held = 0;
    }

    /// Verifies the allocator's bookkeeping.
    pub(crate) fn check(&self) -> Result<(), String> {
        let per = self.slots_per_page();
        let mut free_total = 0u64;
        let mut held = 0;
        for (pi, sp) in self.pages.iter().enumerate() {
            let Some(sp) = sp else { continue };
            held += 1;
            free_total += u64::from(sp.free);
            let mut s = sp.head;
            for _ in 0..sp.free {
                if s >= per {
                    return Err(format!("slab page {pi}: free list leaves the page"));
                }
                if sp.page.u32_at(s as usize * self.slot_size + 4) != FREE_MARK {
                    return Err(format!("slab page {pi}: free slot {s} without mark"));
                }
                s = sp.page.u32_at(s as usize * self.slot_size);
            }
            if s != NO_SLOT {
                return Err(format!("slab page {pi}: free list longer than {}", sp.free));
            }
            let listed = sp.list_pos != NOT_LISTED;
            if listed != (sp.free > 0 && !sp.no_alloc) {
                return Err(format!("slab page {pi}: listed={listed} free={}", sp.free));
            }
            if listed && self.with_free.get(sp.list_pos as usize) != Some(&(pi as u32)) {
                return Err(format!("slab page {pi}: wrong list position"));
            }
            if sp.free == per && !sp.in_empties {
                return Err(format!(
                    "slab page {pi}: empty page not a release candidate"
                ));
            }
        }
        if free_total != self.free_slots || held != self.held {
            return Err(format!(
                "slab: counted {free_total} free slots on {held} pages, recorded {} on {}",
                self.free_slots, self.held
            ));
        }
        Ok(())
    }
}
