//! Indexes of a fragment, both living in 32 KB pages of the node's DataMemory pool.
//!
//! - [`HashIndex`] (`hash.rs`, `hash_grow.rs`): the primary-key hash index, NDB's DBACC —
//!   linear hashing over 64-byte bucket containers, one split or merge at a time.
//! - [`OrderedIndex`] (`ordered.rs`, `ordered_tree.rs`, `ordered_scan.rs`,
//!   `ordered_stock.rs`): an ordered index, NDB's DBTUX —
//!   a B+tree of 512-byte nodes holding only row ids; keys are read from the rows
//!   through caller-supplied comparison closures, and the tree is not checkpointed
//!   (rebuilt at restart).
//! - `slab.rs`: the fixed-size slot allocator both use for their pool pages.
//!
//! Both structures are single-threaded: the fragment owner holds `&mut` for changes.
//! Every page is owned by exactly one structure (moved out of and back into the
//! [`PagePool`](crate::storage::pool::PagePool)); a structure holds no page while empty
//! and returns pages as soon as they hold nothing (the ordered index keeps the free
//! nodes that back outstanding reservations).

pub mod hash;
mod hash_grow;
pub mod ordered;
mod ordered_pack;
mod ordered_scan;
mod ordered_stock;
mod ordered_tree;
mod slab;

#[cfg(test)]
mod hash_tests;
#[cfg(test)]
mod ordered_tests;

pub use hash::HashIndex;
pub use ordered::{OrderedIndex, ScanDirection, Seek};
pub use ordered_pack::PackStep;
