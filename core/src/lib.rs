//! rndb: an NDB-style database engine — the data nodes of MySQL Cluster, in Rust.
//!
//! Layout follows NDB's blocks: [`storage`] (DBTUP pages and rows), [`index`] (DBACC hash
//! index, DBTUX ordered index), [`txn`] (DBLQH: fragments, row locks, pending changes),
//! [`api`] (DBTC transactions and what the wrappers call: Cluster, Ndb, Transaction),
//! [`schema`] (DBDICT), [`config`] (config.ini), [`mgm`] and [`ndbinfo`] (management
//! commands and monitoring tables), [`sql`] (the SQL subset), [`transport`] (messages
//! between nodes and the TCP transporter) and [`cluster`] (QMGR: membership,
//! heartbeats, arbitration, and the deterministic simulator that tests them).

pub mod api;
pub mod checkpoint;
pub mod cluster;
pub mod config;
pub mod disk;
pub mod error;
pub mod index;
pub mod log;
pub mod mgm;
pub mod ndbinfo;
pub mod schema;
pub mod sql;
pub mod storage;
pub mod transport;
pub mod txn;

pub use api::{AbortOption, Cluster, ExecType, Ndb, OpId, OpKind, OpOutcome, Transaction};
pub use error::{ErrorClassification, ErrorStatus, NdbError, Result};
pub use schema::Value;
pub use txn::LockMode;
