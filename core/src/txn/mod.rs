//! DBLQH/DBTUP level of transactions: fragments with their row locks and pending
//! changes. The coordinator (DBTC) is in [`crate::api::transaction`].

pub mod fragment;
pub mod lock;

pub use fragment::{Fragment, FragmentCell, Step};
pub use lock::{LockMode, TxnId};
