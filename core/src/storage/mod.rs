//! DBTUP-level storage: the DataMemory page pool and the fixed-size and var-size parts
//! of rows, per fragment.

pub mod fixed;
pub mod pool;
pub mod row_id;
pub mod var;

pub use fixed::FixedPages;
pub use pool::{PAGE_SIZE, Page, PageKind, PagePool};
pub use row_id::RowId;
pub use var::VarPages;
