//! Schema: column types, values, table definitions and the row format.

pub mod codec;
pub mod layout;
pub mod table;
pub mod types;
pub mod value;

pub use layout::RowLayout;
pub use table::{
    Column, HIDDEN_PK_NAME, IndexDef, IndexKind, StorageType, TableDef, UNIQUE_INDEX_SUFFIX,
};
pub use types::{BlobKind, Charset, ColumnType};
pub use value::{Date, Datetime, Decimal, Value};
