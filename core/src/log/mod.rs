//! Logs of a data node that are not disk-data logs: the REDO log (NDB's DBLQH fragment
//! log, [`redo`]), written by committing transactions and made durable by global
//! checkpoints, and replayed at system restart on top of the local checkpoints.
//!
//! The undo log of disk-data pages (LGMAN) lives in `crate::disk::lgman`.

pub mod redo;
