//! Handles: what C sees as `rndb_transaction*` and the like are not addresses but
//! numbers naming a slot of a registry, checked on every call.
//!
//! A handle packs, from the top: a 4-bit kind, a 20-bit slot index, a 20-bit generation
//! and a 20-bit sub-index (an operation or rec attr of a transaction; 0 otherwise):
//!
//! ```text
//!  63    60 59            40 39            20 19             0
//! | kind   | slot index     | generation     | sub-index       |
//! ```
//!
//! A slot's generation is odd while the slot is in use and even while it is free; freeing
//! bumps it, so a handle kept after its object was freed no longer matches and is
//! reported (error 4604 for transactions and their parts, 4118 otherwise) instead of
//! being dereferenced. The kind catches a handle of one type passed as another. NULL is
//! never a valid handle. The generation wraps after 2^19 reuses of one slot; a handle
//! kept that long could alias a newer object of the same kind.
//!
//! Slots live in chunks that are allocated on demand and never move or shrink (until
//! [`Registry::release_all_memory`] when nothing is live), so a lookup is two loads and
//! a compare, without a lock. Allocation and freeing take the registry's mutex;
//! transactions avoid even that by recycling slots through their Ndb's free list.
//!
//! Transactions are allocated in runs of adjacent slots ([`Registry::insert_run`]), one
//! run per Ndb at a time, so that the objects of two threads' Ndbs do not alternate in
//! memory. Alternating, they cost two-thread flexAsynch reads 15–22% (the cores'
//! prefetchers pull the other thread's neighbouring objects, whose next write then has
//! to take the line back); in runs, nothing (benches/RESULTS.md, tenth pass).
//!
//! Thread rules (NDB's): connections may be shared between threads; an Ndb object and
//! everything obtained from it (dictionary, tables, transactions, operations, rec attrs)
//! must be used by one thread at a time. The registry itself is thread-safe.

use std::cell::UnsafeCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

const KIND_SHIFT: u32 = 60;
const SLOT_SHIFT: u32 = 40;
const GEN_SHIFT: u32 = 20;
const FIELD_MASK: u64 = (1 << 20) - 1;
pub(crate) const MAX_SUB: usize = (1 << 20) - 1;

const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;
const MAX_CHUNKS: usize = 1 << (20 - CHUNK_BITS);

/// What a handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Connection = 1,
    Ndb = 2,
    Dictionary = 3,
    Table = 4,
    Column = 5,
    Index = 6,
    Transaction = 7,
    Operation = 8,
    Scan = 9,
    RecAttr = 10,
    Record = 11,
}

impl Kind {
    pub fn c_name(self) -> &'static str {
        match self {
            Kind::Connection => "rndb_cluster_connection",
            Kind::Ndb => "rndb_ndb",
            Kind::Dictionary => "rndb_dictionary",
            Kind::Table => "rndb_table",
            Kind::Column => "rndb_column",
            Kind::Index => "rndb_index",
            Kind::Transaction => "rndb_transaction",
            Kind::Operation => "rndb_operation",
            Kind::Scan => "rndb_scan",
            Kind::RecAttr => "rndb_rec_attr",
            Kind::Record => "rndb_record",
        }
    }

    fn from_bits(b: u64) -> Option<Kind> {
        Some(match b {
            1 => Kind::Connection,
            2 => Kind::Ndb,
            3 => Kind::Dictionary,
            4 => Kind::Table,
            5 => Kind::Column,
            6 => Kind::Index,
            7 => Kind::Transaction,
            8 => Kind::Operation,
            9 => Kind::Scan,
            10 => Kind::RecAttr,
            11 => Kind::Record,
            _ => return None,
        })
    }
}

/// A decoded handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    pub kind: Kind,
    pub slot: u32,
    pub generation: u32,
    pub sub: u32,
}

/// Why a handle was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandleError {
    Null,
    /// Not a handle of the expected kind (garbage, or another type's handle).
    WrongKind {
        expected: Kind,
        found: Option<Kind>,
    },
    /// The object was freed or closed.
    Stale,
}

impl Handle {
    #[inline]
    pub fn new(kind: Kind, slot: u32, generation: u32, sub: u32) -> Handle {
        Handle {
            kind,
            slot,
            generation: generation & FIELD_MASK as u32,
            sub,
        }
    }

    #[inline]
    pub fn encode(self) -> usize {
        let v = ((self.kind as u64) << KIND_SHIFT)
            | ((self.slot as u64 & FIELD_MASK) << SLOT_SHIFT)
            | ((self.generation as u64 & FIELD_MASK) << GEN_SHIFT)
            | (self.sub as u64 & FIELD_MASK);
        v as usize
    }

    /// As an opaque pointer for C (never dereferenced by anyone).
    #[inline]
    pub fn ptr<T>(self) -> *mut T {
        std::ptr::without_provenance_mut(self.encode())
    }

    #[inline]
    pub fn with(self, kind: Kind, sub: u32) -> Handle {
        Handle { kind, sub, ..self }
    }

    /// Decodes a pointer received from C, accepting any of `kinds` (a constant list at
    /// every call site: the check is a compare per kind).
    ///
    /// NULL has kind bits 0, which no kind has: it fails the compares like any other
    /// wrong kind, and the refusal is told apart out of line ([`Handle::refusal`]), so
    /// that the accepting path is the compares alone (no jump table on the kind bits).
    #[inline(always)]
    pub fn decode<T>(p: *const T, kinds: &[Kind]) -> Result<Handle, HandleError> {
        let v = p.addr() as u64;
        let bits = v >> KIND_SHIFT;
        for &k in kinds {
            if k as u64 == bits {
                return Ok(Handle {
                    kind: k,
                    slot: ((v >> SLOT_SHIFT) & FIELD_MASK) as u32,
                    generation: ((v >> GEN_SHIFT) & FIELD_MASK) as u32,
                    sub: (v & FIELD_MASK) as u32,
                });
            }
        }
        Err(Handle::refusal(v, kinds[0]))
    }

    /// Why `v` is not a handle of kind `expected` (one of those [`Handle::decode`]
    /// accepts).
    #[cold]
    #[inline(never)]
    fn refusal(v: u64, expected: Kind) -> HandleError {
        if v == 0 {
            return HandleError::Null;
        }
        HandleError::WrongKind {
            expected,
            found: Kind::from_bits(v >> KIND_SHIFT),
        }
    }
}

/// A registry slot: the generation first, then the object, on a cache line boundary (so
/// that the generation check and the first fields of the object share a line; see
/// `TxObj`).
#[repr(C, align(64))]
struct Slot<T> {
    generation: AtomicU32,
    value: UnsafeCell<Option<T>>,
}

struct FreeList {
    free: Vec<u32>,
    /// First slots of released runs ([`Registry::release_run`]), all of one length.
    free_runs: Vec<u32>,
    next: u32,
    live: usize,
}

/// A slot found live by [`Registry::get_live`] (for the thread that owns its object).
/// Retiring marks the slot free but keeps its value, for reuse by [`Registry::revive`];
/// the caller keeps the slot index (it is not on the registry's free list).
pub struct LiveSlot<'a> {
    generation: &'a AtomicU32,
    next: u32,
    index: u32,
}

impl LiveSlot<'_> {
    /// Marks the slot free, keeping its value; returns its index.
    #[inline(always)]
    pub fn retire(self) -> u32 {
        self.generation.store(self.next, Ordering::Release);
        self.index
    }
}

/// Slots of one kind of object.
pub struct Registry<T> {
    kind: Kind,
    chunks: [AtomicPtr<Slot<T>>; MAX_CHUNKS],
    state: Mutex<FreeList>,
}

// The registry hands out raw pointers to slot values; the thread rules above say who may
// use them. Objects move between threads with their Ndb, hence `T: Send`.
unsafe impl<T: Send> Sync for Registry<T> {}

impl<T> Registry<T> {
    pub const fn new(kind: Kind) -> Registry<T> {
        Registry {
            kind,
            chunks: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_CHUNKS],
            state: Mutex::new(FreeList {
                free: Vec::new(),
                free_runs: Vec::new(),
                next: 0,
                live: 0,
            }),
        }
    }

    #[inline(always)]
    fn slot(&self, index: u32) -> Option<&Slot<T>> {
        let c = (index as usize) >> CHUNK_BITS;
        let chunk = self.chunks.get(c)?.load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: chunks are arrays of CHUNK slots, allocated once and freed only by
        // `release_all_memory` when no slot is live.
        Some(unsafe { &*chunk.add(index as usize & (CHUNK - 1)) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FreeList> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The object a handle names, if the handle is live.
    #[inline(always)]
    pub fn get(&self, h: Handle) -> Result<*mut T, HandleError> {
        let slot = self.slot(h.slot).ok_or(HandleError::Stale)?;
        let g = slot.generation.load(Ordering::Acquire);
        if g & 1 == 0 || (g & FIELD_MASK as u32) != h.generation {
            return Err(HandleError::Stale);
        }
        // SAFETY: a live slot always holds a value: `insert` stores it before making the
        // generation odd, `remove` takes it after making it even, `revive` makes live
        // only slots that kept theirs, and `release` empties only retired slots. The
        // pointer is taken without reading the Option's tag, which can sit on another
        // cache line of a large object.
        Ok(unsafe {
            let opt: *mut Option<T> = slot.value.get();
            debug_assert!((*opt).is_some(), "live slot without a value");
            (*opt).as_mut().unwrap_unchecked() as *mut T
        })
    }

    /// The object a handle names, if the handle is live, with its slot: retiring it
    /// then needs no second lookup ([`LiveSlot::retire`]).
    #[inline(always)]
    pub fn get_live(&self, h: Handle) -> Result<(*mut T, LiveSlot<'_>), HandleError> {
        let slot = self.slot(h.slot).ok_or(HandleError::Stale)?;
        let g = slot.generation.load(Ordering::Acquire);
        if g & 1 == 0 || (g & FIELD_MASK as u32) != h.generation {
            return Err(HandleError::Stale);
        }
        // SAFETY: as in `get`.
        let p = unsafe {
            let opt: *mut Option<T> = slot.value.get();
            debug_assert!((*opt).is_some(), "live slot without a value");
            (*opt).as_mut().unwrap_unchecked() as *mut T
        };
        Ok((
            p,
            LiveSlot {
                generation: &slot.generation,
                next: (h.generation + 1) & FIELD_MASK as u32,
                index: h.slot,
            },
        ))
    }

    /// Makes sure the chunk holding slot `index` exists (under the lock).
    fn ensure_chunk(&self, _st: &mut FreeList, index: u32) {
        let c = index as usize >> CHUNK_BITS;
        if self.chunks[c].load(Ordering::Acquire).is_null() {
            let chunk: Box<[Slot<T>]> = (0..CHUNK)
                .map(|_| Slot {
                    generation: AtomicU32::new(0),
                    value: UnsafeCell::new(None),
                })
                .collect();
            self.chunks[c].store(Box::into_raw(chunk).cast(), Ordering::Release);
        }
    }

    /// Stores a new object; returns its handle.
    pub fn insert(&self, v: T) -> Result<Handle, T> {
        let index = {
            let mut st = self.lock();
            let index = match st.free.pop() {
                Some(i) => i,
                None => {
                    let i = st.next;
                    if i as usize >= MAX_CHUNKS * CHUNK {
                        return Err(v);
                    }
                    self.ensure_chunk(&mut st, i);
                    st.next += 1;
                    i
                }
            };
            st.live += 1;
            index
        };
        let Some(slot) = self.slot(index) else {
            return Err(v);
        };
        // SAFETY: the slot is free (even generation) and was taken off the free list
        // under the lock: nobody else uses it.
        unsafe { *slot.value.get() = Some(v) };
        let g = (slot.generation.load(Ordering::Relaxed) + 1) & FIELD_MASK as u32;
        slot.generation.store(g, Ordering::Release);
        Ok(Handle::new(self.kind, index, g, 0))
    }

    /// Frees the object a handle names and returns it.
    pub fn remove(&self, h: Handle) -> Result<T, HandleError> {
        self.get(h)?;
        let slot = self.slot(h.slot).ok_or(HandleError::Stale)?;
        slot.generation
            .store((h.generation + 1) & FIELD_MASK as u32, Ordering::Release);
        // SAFETY: the handle was live and is now dead; the caller owned the object.
        let v = unsafe { (*slot.value.get()).take() };
        let mut st = self.lock();
        st.free.push(h.slot);
        st.live -= 1;
        v.ok_or(HandleError::Stale)
    }

    /// Takes `run` adjacent free slots (`run` a power of two up to a chunk, the same for
    /// every run of this registry) and stores `make()` in each, retired: the caller owns
    /// the slots, makes them live with [`Registry::revive`], and gives them back with
    /// [`Registry::release_run`]. Returns the first slot; None when the registry is full.
    pub fn insert_run(&self, run: u32, mut make: impl FnMut() -> T) -> Option<u32> {
        assert!(
            run.is_power_of_two() && run as usize <= CHUNK,
            "a run is a power of two up to a chunk: {run}"
        );
        let first = {
            let mut st = self.lock();
            let first = match st.free_runs.pop() {
                Some(first) => first,
                None => {
                    // Runs start at multiples of `run`, so none straddles two chunks; the
                    // slots skipped to get there go to the single free list.
                    let first = st.next.next_multiple_of(run);
                    if first as usize + run as usize > MAX_CHUNKS * CHUNK {
                        return None;
                    }
                    for skipped in st.next..first {
                        st.free.push(skipped);
                    }
                    self.ensure_chunk(&mut st, first);
                    st.next = first + run;
                    first
                }
            };
            st.live += run as usize;
            first
        };
        for index in first..first + run {
            let slot = self.slot(index)?;
            debug_assert_eq!(slot.generation.load(Ordering::Relaxed) & 1, 0, "free slot");
            // SAFETY: the slot is free and was taken under the lock: nobody else uses it.
            // The generation stays even (retired); `revive` makes it live.
            unsafe { *slot.value.get() = Some(make()) };
        }
        Some(first)
    }

    /// Drops the values of a run taken by [`Registry::insert_run`] and gives its slots
    /// back; returns false, releasing nothing, when a slot of it is still live (its
    /// value must outlive the handle: the run is then kept as it is).
    pub fn release_run(&self, first: u32, run: u32) -> bool {
        let slots: Option<Vec<&Slot<T>>> = (first..first + run).map(|i| self.slot(i)).collect();
        let Some(slots) = slots else {
            return false;
        };
        if slots
            .iter()
            .any(|s| s.generation.load(Ordering::Acquire) & 1 == 1)
        {
            debug_assert!(false, "a slot of run {first} is live");
            return false;
        }
        for slot in slots {
            // SAFETY: retired and owned by the caller.
            drop(unsafe { (*slot.value.get()).take() });
        }
        let mut st = self.lock();
        st.free_runs.push(first);
        st.live -= run as usize;
        true
    }

    /// Makes a retired slot live again; returns its new handle and its kept value.
    pub fn revive(&self, index: u32) -> Option<(Handle, *mut T)> {
        let slot = self.slot(index)?;
        let g = slot.generation.load(Ordering::Acquire);
        if g & 1 == 1 {
            return None;
        }
        // SAFETY: retired slots keep their value; the caller owns the slot.
        let v = unsafe { (*slot.value.get()).as_mut()? } as *mut T;
        let g = (g + 1) & FIELD_MASK as u32;
        slot.generation.store(g, Ordering::Release);
        Some((Handle::new(self.kind, index, g, 0), v))
    }

    /// The handle of slot `index` if it is live.
    pub fn live(&self, index: u32) -> Option<Handle> {
        let slot = self.slot(index)?;
        let g = slot.generation.load(Ordering::Acquire);
        (g & 1 == 1).then(|| Handle::new(self.kind, index, g, 0))
    }

    /// Frees the chunks when no object is live (library teardown, `rndb_end`).
    pub fn release_all_memory(&self) {
        let mut st = self.lock();
        if st.live != 0 {
            return;
        }
        for c in &self.chunks {
            let p = c.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                // SAFETY: allocated in `insert` as a boxed slice of CHUNK slots.
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, CHUNK)) });
            }
        }
        st.free = Vec::new();
        st.free_runs = Vec::new();
        st.next = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_go_stale() {
        static R: Registry<String> = Registry::new(Kind::Table);
        let h = R.insert("a".to_string()).expect("insert");
        let p: *mut u8 = h.ptr();
        let d = Handle::decode(p, &[Kind::Table]).expect("decode");
        assert_eq!(d, h);
        assert!(matches!(
            Handle::decode(p, &[Kind::Column]),
            Err(HandleError::WrongKind { .. })
        ));
        assert_eq!(
            Handle::decode(std::ptr::null::<u8>(), &[Kind::Table]),
            Err(HandleError::Null)
        );
        // SAFETY: live handle, single thread.
        assert_eq!(unsafe { &*R.get(d).expect("live") }, "a");
        assert_eq!(R.remove(d).as_deref(), Ok("a"));
        assert_eq!(R.get(d).err(), Some(HandleError::Stale));
        let h2 = R.insert("b".to_string()).expect("insert");
        assert_eq!(h2.slot, h.slot, "slot reused");
        assert_eq!(
            R.get(d).err(),
            Some(HandleError::Stale),
            "old handle stays stale"
        );
        let idx = R.get_live(h2).expect("live").1.retire();
        assert_eq!(R.get(h2).err(), Some(HandleError::Stale));
        assert_eq!(R.live(idx), None, "retired");
        let (h3, v) = R.revive(idx).expect("revive");
        assert_eq!(R.live(idx), Some(h3));
        // SAFETY: revived slot, single thread.
        assert_eq!(unsafe { &*v }, "b");
        assert!(R.get(h3).is_ok());
        R.get_live(h3).expect("live").1.retire();
        assert_eq!(R.get_live(h3).err(), Some(HandleError::Stale));
        assert_eq!(
            R.remove(h2).err(),
            Some(HandleError::Stale),
            "retired: not live"
        );
        let (h4, _) = R.revive(idx).expect("revive");
        assert_eq!(R.remove(h4).as_deref(), Ok("b"));
        R.release_all_memory();
    }

    #[test]
    fn runs_are_adjacent_aligned_and_reused() {
        static R: Registry<u32> = Registry::new(Kind::Record);
        // A single slot first: the run after it starts at the next multiple of 4.
        let single = R.insert(7).expect("insert");
        assert_eq!(single.slot, 0);
        let mut n = 0;
        let a = R
            .insert_run(4, || {
                n += 1;
                n
            })
            .expect("run");
        assert_eq!(a, 4, "aligned to the run length");
        let b = R.insert_run(4, || 0).expect("run");
        assert_eq!(b, 8, "adjacent to the previous run");
        // Run slots are retired until revived, and keep the values made for them.
        assert_eq!(R.live(a), None);
        let (h, v) = R.revive(a + 2).expect("revive");
        // SAFETY: revived slot, single thread.
        assert_eq!(unsafe { *v }, 3);
        // The slots skipped for the alignment serve single inserts.
        let s2 = R.insert(8).expect("insert");
        assert!((1..4).contains(&s2.slot), "slot {}", s2.slot);
        R.get_live(h).expect("live").1.retire();
        R.release_run(a, 4);
        assert_eq!(
            R.insert_run(4, || 0),
            Some(a),
            "a released run is reused whole"
        );
        R.release_run(a, 4);
        R.release_run(b, 4);
        assert_eq!(R.remove(single), Ok(7));
        assert_eq!(R.remove(s2), Ok(8));
        R.release_all_memory();
    }
}
