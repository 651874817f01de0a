//! Logs of a data node that are not disk-data logs: the REDO log (NDB's DBLQH fragment
//! log, [`redo`]), written by committing transactions and made durable by global
//! checkpoints ([`gcp`]; each node records what it saved in its system file,
//! [`sysfile`], through [`node`]), and replayed at system restart on top of the local checkpoints.
//!
//! The undo log of disk-data pages (LGMAN) lives in `crate::disk::lgman`.

pub mod gcp;
pub mod node;
pub mod redo;
pub mod sysfile;
