//! DBTUP-level storage: the DataMemory page pool and the fixed-size and var-size parts
//! of rows, per fragment.

pub mod fixed;
pub mod page_map;
pub mod pool;
pub mod row_id;
pub mod var;

pub use fixed::FixedPages;
pub use pool::{PAGE_SIZE, Page, PageBox, PageKind, PagePool};
pub use row_id::RowId;
pub use var::VarPages;

/// Hint that `bytes` will be read soon (software prefetch into L1); no effect on
/// correctness. Batched lookups use it to overlap cache misses.
#[inline(always)]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: a prefetch is a hint; the pointer is into a live slice, and the
        // instruction never faults nor changes memory.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                bytes.as_ptr() as *const i8
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
