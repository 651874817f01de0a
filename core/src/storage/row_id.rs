//! Row ids: the stable, fragment-local address of a row (NDB's Local_key).
//!
//! A row id names the row's fixed-size part: a logical page number of the fragment
//! and a slot index on that page. It is stable for the row's lifetime (until OPTIMIZE
//! TABLE moves the row, which updates every index that refers to it), which is what
//! checkpoints and node-restart copy rely on.

/// Bits of a row id given to the slot index on a page.
pub const ROW_ID_SLOT_BITS: u32 = 13;
/// Largest slot index + 1 (NDB's MAX_TUPLES_PER_PAGE is 8191).
pub const MAX_SLOTS_PER_PAGE: u32 = 1 << ROW_ID_SLOT_BITS;
/// Largest logical page number + 1 a fragment can address (16 GB of fixed parts).
pub const MAX_LOGICAL_PAGES: u32 = 1 << (32 - ROW_ID_SLOT_BITS);

/// Fragment-local row id: `logical_page << 13 | slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowId(pub u32);

impl RowId {
    #[inline]
    pub fn new(logical_page: u32, slot: u32) -> RowId {
        debug_assert!(
            logical_page < MAX_LOGICAL_PAGES,
            "logical page {logical_page} out of range"
        );
        debug_assert!(slot < MAX_SLOTS_PER_PAGE, "slot {slot} out of range");
        RowId((logical_page << ROW_ID_SLOT_BITS) | slot)
    }
    #[inline]
    pub fn page(self) -> u32 {
        self.0 >> ROW_ID_SLOT_BITS
    }
    #[inline]
    pub fn slot(self) -> u32 {
        self.0 & (MAX_SLOTS_PER_PAGE - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip() {
        let r = RowId::new(MAX_LOGICAL_PAGES - 1, MAX_SLOTS_PER_PAGE - 1);
        assert_eq!(r.page(), MAX_LOGICAL_PAGES - 1);
        assert_eq!(r.slot(), MAX_SLOTS_PER_PAGE - 1);
        assert_eq!(RowId::new(3, 7).0, (3 << 13) | 7);
    }
}
