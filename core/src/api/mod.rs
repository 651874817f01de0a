//! The engine's API, what the Python module, the C ABI and the shell call: `Cluster`
//! (like Ndb_cluster_connection with an embedded cluster), `Ndb`, `Transaction`, scans.

pub mod cluster;
pub mod dict;
pub mod dict_file;
pub mod disk;
mod disk_restart;
pub mod disk_sql;
pub mod durability;
pub mod lcp;
pub mod ndb;
pub mod node_restart;
mod node_restart_own;
pub mod optimize;
pub mod scan;
pub mod spec_sql;
pub mod transaction;
pub mod unique;

pub use cluster::{Cluster, ClusterInner, LocalEngineStart};
pub use dict::{TableRuntime, TableSpec};
pub use ndb::Ndb;
pub use scan::{Scan, ScanSpec};
pub use transaction::{AbortOption, ExecType, OpId, OpKind, OpOutcome, Transaction, TxState};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod disk_restart_tests;
#[cfg(test)]
mod durability_tests;
#[cfg(test)]
mod durable_node_restart_tests;
#[cfg(test)]
mod lcp_spare_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod node_restart_tests;
#[cfg(test)]
mod optimize_disk_tests;
#[cfg(test)]
mod optimize_tests;
#[cfg(test)]
mod sim_crash_model;
#[cfg(test)]
mod sim_crash_tests;

#[cfg(test)]
mod own_node_restart_tests;
